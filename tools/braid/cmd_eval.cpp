// braid eval CHECKPOINT: a policy on held-out prompts (--prompts, with a reward rule or
// command), or a reward model on held-out preference pairs (--pairs), as a braid.eval
// JSON document on stdout or -o; the logic is lib/eval/eval.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "eval/eval.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

struct EvalCli {
  eval::PolicyEvalOptions policy;
  std::string pairs;
  std::string ref;
  double beta = 0.1;
  bool length_normalize = false;
  std::string out = "-";
  double reward_cmd_timeout = 0;
};

int run_eval(EvalCli& o, const CLI::App& sub) {
  const bool have_prompts = !o.policy.prompts.empty();
  if (have_prompts == !o.pairs.empty()) {
    throw UsageError("give exactly one of --prompts (a policy) and --pairs (a reward model, or with --ref a DPO policy)");
  }
  if (have_prompts) {
    for (const char* pairs_only : {"--ref", "--beta", "--length-normalize"}) {
      if (sub.get_option(pairs_only)->count() > 0) {
        throw UsageError(fmt::format("{} is for a DPO policy on --pairs, not --prompts", pairs_only));
      }
    }
  }
  if (sub.get_option("--reward-cmd-timeout")->count() > 0) o.policy.reward_cmd_timeout = o.reward_cmd_timeout;
  ordered_json result;
  if (have_prompts) {
    result = eval::evaluate_policy(o.policy);
    std::string line = fmt::format("{}: pass@1 {:.4f}", o.policy.model.checkpoint, result["pass@1"].get<double>());
    std::vector<int> ks = o.policy.k;
    ks.push_back(o.policy.samples);
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (const int k : ks) {
      if (k == 1) continue;
      const std::string key = fmt::format("pass@{}", k);
      line += fmt::format("  {} {:.4f}", key, result[key].get<double>());
    }
    line += fmt::format("  mean reward {:.4f}  length {:.1f}  ({} prompts)", result["mean_reward"].get<double>(),
                        result["mean_response_length"].get<double>(), result["prompts"].get<std::int64_t>());
    log::info("{}", line);
  } else {
    for (const char* policy_only : {"--reward-rule", "--reward-cmd", "--samples", "--temperature", "--by", "--k"}) {
      if (sub.get_option(policy_only)->count() > 0) throw UsageError(fmt::format("{} is for a policy (--prompts), not --pairs", policy_only));
    }
    const eval::PairEvalOptions pair_opt{.model = o.policy.model, .pairs = o.pairs, .ref = o.ref, .beta = o.beta,
                                         .length_normalize = o.length_normalize};
    if (o.ref.empty()) {
      for (const char* dpo_only : {"--beta", "--length-normalize"}) {
        if (sub.get_option(dpo_only)->count() > 0) throw UsageError(fmt::format("{} goes with --ref (a DPO policy)", dpo_only));
      }
    }
    result = o.ref.empty() ? eval::evaluate_reward_model(pair_opt) : eval::evaluate_dpo_policy(pair_opt);
    log::info("{}: accuracy {:.4f}  mean margin {:.4f}  ({} pairs)", o.policy.model.checkpoint,
              result["accuracy"].get<double>(), result["mean_margin"].get<double>(), result["pairs"].get<std::int64_t>());
  }
  const std::string text = result.dump(2) + "\n";
  if (o.out == "-") {
    std::cout << text << std::flush;
  } else {
    write_text_file(o.out, text);
  }
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<EvalCli>();
  auto* sub = app.add_subcommand(
      "eval", "Evaluate a checkpoint on held-out data: a policy on a prompt file (--prompts: mean reward, pass@k for "
              "every k <= n, maj@k, under a reward rule or command), a reward model on preference pairs (--pairs: "
              "accuracy) or a DPO policy on them (--pairs --ref: its implicit reward's accuracy); writes a braid.eval "
              "JSON document");
  auto& p = o->policy;
  sub->add_option("checkpoint", p.model.checkpoint, "The policy or reward model (a weight file or the stem of its stage files)")
      ->required();
  sub->add_option("--prompts", p.prompts, "Held-out prompt file (braid-generate's JSON Lines; the policy is evaluated)");
  sub->add_option("--pairs", o->pairs, "Held-out {\"prompt\",\"chosen\",\"rejected\"} lines (a reward model, or with "
                                      "--ref a DPO policy, is evaluated)");
  sub->add_option("--ref", o->ref, "With --pairs: the checkpoint is a policy and this its DPO reference; a pair is right "
                                   "when the chosen completion's implicit reward beta*(log pi - log pi_ref) is the larger");
  sub->add_option("--beta", o->beta, "The implicit reward's beta (DPO)")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_flag("--length-normalize", o->length_normalize, "A completion's logprob as the mean over its tokens (as "
                                                           "braid-train dpo --length-normalize)");
  sub->add_option("--reward-rule", p.reward_rule, "What a sample scores: a rule of braid-score (math, digits, regex:RE, ...)");
  sub->add_option("--reward-cmd", p.reward_cmd, "... or the user's scorer command (braid-score --reward-cmd)");
  sub->add_option("--reward-cmd-dir", p.reward_cmd_dir, "The scorer command's working folder");
  sub->add_option("--reward-cmd-timeout", o->reward_cmd_timeout, "Seconds to wait for each of its answers")
      ->check(CLI::PositiveNumber);
  sub->add_option("-n,--samples", p.samples, "Samples per prompt (pass@n)")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--temperature", p.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--top-p", p.top_p, "Nucleus sampling mass")->capture_default_str();
  sub->add_option("--top-k", p.top_k, "Top-k sampling (0: off)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--seed", p.seed, "Sampling seed")->capture_default_str();
  sub->add_option("--max-new-tokens", p.max_new_tokens, "Response tokens at most")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--max-batch", p.max_batch, "Sequences decoding together")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--limit", p.limit, "Only the first N prompts (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--correct-at", p.correct_at, "A sample is right when its reward is at least this")->capture_default_str();
  sub->add_option("-k,--k", p.k, "Also report pass@K and maj@K as keys (and pass@K on the summary line) for these K, "
                                "each at most --samples (every k <= n is in pass_at_k / maj_at_k anyway)")
      ->delimiter(',');
  sub->add_option("--by", p.by, "Also break the figures down by this prompt field (e.g. digits)");
  sub->add_option("--tokenizer", p.model.tokenizer, "byte, or a tokenizer.json / HF folder")->capture_default_str();
  sub->add_option("--tools", p.model.tools, "A JSON file of tool schemas for the conversations without \"tools\"");
  sub->add_option("--chat-template-kwargs", p.model.chat_template_kwargs,
                  "Chat template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": false}' (a line's "
                  "own \"chat_template_kwargs\" win)");
  sub->add_option("--threads", p.model.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
  sub->add_option("--micro-tokens", p.model.micro_tokens, "Tokens per forward micro-batch (--pairs)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  backend::add_device_option(*sub, p.model.device);
  backend::add_dtype_option(*sub, p.model.dtype);
  sub->add_option("-o,--output", o->out, "Where the JSON goes (- is stdout)")->capture_default_str();
  verbs.add(sub, [o, sub] { return run_eval(*o, *sub); });
}

}  // namespace braid::driver
