// braid eval CHECKPOINT: a policy on held-out prompts (--prompts, with a reward rule or
// command), or a reward model on held-out preference pairs (--pairs), as a braid.eval
// JSON document on stdout or -o; the logic is lib/eval/eval.
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
  std::string out = "-";
  double reward_cmd_timeout = 0;
};

int run_eval(EvalCli& o, const CLI::App& sub) {
  const bool have_prompts = !o.policy.prompts.empty();
  if (have_prompts == !o.pairs.empty()) throw UsageError("give exactly one of --prompts (a policy) and --pairs (a reward model)");
  if (sub.get_option("--reward-cmd-timeout")->count() > 0) o.policy.reward_cmd_timeout = o.reward_cmd_timeout;
  ordered_json result;
  if (have_prompts) {
    result = eval::evaluate_policy(o.policy);
    std::string line = fmt::format("{}: pass@1 {:.4f}", o.policy.model.checkpoint, result["pass@1"].get<double>());
    if (o.policy.samples > 1) {
      const std::string key = fmt::format("pass@{}", o.policy.samples);
      line += fmt::format("  {} {:.4f}", key, result[key].get<double>());
    }
    line += fmt::format("  mean reward {:.4f}  length {:.1f}  ({} prompts)", result["mean_reward"].get<double>(),
                        result["mean_response_length"].get<double>(), result["prompts"].get<std::int64_t>());
    log::info("{}", line);
  } else {
    for (const char* policy_only : {"--reward-rule", "--reward-cmd", "--samples", "--temperature", "--by"}) {
      if (sub.get_option(policy_only)->count() > 0) throw UsageError(fmt::format("{} is for a policy (--prompts), not --pairs", policy_only));
    }
    result = eval::evaluate_reward_model({.model = o.policy.model, .pairs = o.pairs});
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
      "eval", "Evaluate a checkpoint on held-out data: a policy on a prompt file (--prompts: mean reward, pass@1, "
              "pass@n under a reward rule or command) or a reward model on preference pairs (--pairs: accuracy); "
              "writes a braid.eval JSON document");
  auto& p = o->policy;
  sub->add_option("checkpoint", p.model.checkpoint, "The policy or reward model (a weight file or the stem of its stage files)")
      ->required();
  sub->add_option("--prompts", p.prompts, "Held-out prompt file (braid-generate's JSON Lines; the policy is evaluated)");
  sub->add_option("--pairs", o->pairs, "Held-out {\"prompt\",\"chosen\",\"rejected\"} lines (the reward model is evaluated)");
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
