// braid eval CHECKPOINT: a policy on held-out prompts (--prompts, with a reward rule or
// command), or a reward model on held-out preference pairs (--pairs), as a braid.eval
// JSON document on stdout or -o; the options are lib/eval/option_schema, the logic
// lib/eval/eval.
#include <algorithm>
#include <array>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "eval/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

// A flag given that the evaluation asked for does not read: refused, naming it.
void refuse_given(const CLI::App& sub, const auto& flags, const std::string& why) {
  for (const char* flag : flags) {
    if (sub.get_option(flag)->count() > 0) throw UsageError(fmt::format("{} {}", flag, why));
  }
}

int run_eval(const eval::EvalOptions& o, const CLI::App& sub) {
  const bool have_prompts = !o.policy.prompts.empty();
  if (have_prompts == !o.pairs.empty()) {
    throw UsageError("give exactly one of --prompts (a policy) and --pairs (a reward model, or with --ref a DPO policy)");
  }
  ordered_json result;
  if (have_prompts) {
    refuse_given(sub, eval::kPairsOnly, "is for --pairs, not --prompts");
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
    refuse_given(sub, eval::kPolicyOnly, "is for a policy (--prompts), not --pairs");
    if (o.ref.empty()) refuse_given(sub, std::array{"--beta", "--length-normalize"}, "goes with --ref (a DPO policy)");
    const eval::PairEvalOptions pair_opt = o.pair_options();
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
  auto o = std::make_shared<eval::EvalOptions>();
  auto* sub = app.add_subcommand(
      "eval", "Evaluate a checkpoint on held-out data: a policy on a prompt file (--prompts: mean reward, pass@k for "
              "every k <= n, maj@k, under a reward rule or command), a reward model on preference pairs (--pairs: "
              "accuracy) or a DPO policy on them (--pairs --ref: its implicit reward's accuracy); writes a braid.eval "
              "JSON document");
  cli::add_schema_options(*sub, *o, eval::eval_schema());
  verbs.add(sub, [o, sub] { return run_eval(*o, *sub); });
}

}  // namespace braid::driver
