#include "score/command.hpp"

#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "io/sample_shard.hpp"
#include "score/text_reward.hpp"
#include "score/shard_stream.hpp"
#include "score/stage_stats.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

namespace braid::score {

ScoreSettings settings_from(const CommandOptions& o) {
  ScoreSettings s;
  s.algorithm = o.algorithm == "grpo" ? Algorithm::grpo : Algorithm::ppo;
  s.gamma = o.gamma;
  s.lambda = o.lambda;
  s.std_eps = o.std_eps;
  s.micro_tokens = o.micro_tokens;
  if (int(!o.reward.empty()) + int(!o.reward_rule.empty()) + int(!o.reward_cmd.empty()) != 1) {
    throw UsageError("give one of --reward CKPT, --reward-rule RULE and --reward-cmd CMD");
  }
  if (o.reward_cmd.empty() && !o.reward_cmd_dir.empty()) throw UsageError("--reward-cmd-dir goes with --reward-cmd");
  if (!(o.reward_cmd_timeout > 0)) throw UsageError("--reward-cmd-timeout must be > 0 seconds");
  if (o.inputs.size() > 1 && std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end()) {
    throw UsageError("'-' (shard paths on stdin) stands alone: give either '-' or shard files");
  }
  if (o.kl_coef && *o.kl_coef > 0 && o.ref.empty()) {
    throw UsageError(fmt::format("--kl-coef {} needs --ref (the KL penalty is against the reference model); "
                                 "without a reference, leave --kl-coef out or set it to 0", *o.kl_coef));
  }
  if (s.algorithm == Algorithm::ppo) {
    if (o.critic.empty()) throw UsageError("--algorithm ppo needs --critic (its values are GAE's baseline)");
    s.kl_coef = o.kl_coef.value_or(o.ref.empty() ? 0.0 : kDefaultKlCoef);
  } else {
    if (!o.critic.empty()) log::warn("--algorithm grpo uses no critic: --critic {} is ignored", o.critic);
    if (o.kl_coef && *o.kl_coef > 0) {
      log::warn("--algorithm grpo puts the KL term in the loss (braid-train grpo --kl-coef): --kl-coef is ignored here");
    }
    s.kl_coef = 0;
  }
  return s;
}

namespace {

// This stage's settings as stored under "score" in each output's meta.config.
json score_config(const CommandOptions& o, const ScoreSettings& s, const std::vector<checkpoint::OpenedModel*>& opened) {
  json c;
  c["stage"] = "score";
  c["algorithm"] = to_string(s.algorithm);
  if (s.algorithm == Algorithm::ppo) {
    c["kl_coef"] = s.kl_coef;
    c["gamma"] = s.gamma;
    c["lambda"] = s.lambda;
  } else {
    c["std_eps"] = s.std_eps;
  }
  if (!o.ref.empty()) c["ref"] = {{"checkpoint", o.ref}, {"step", opened[0]->step}};
  if (!o.critic.empty() && opened[1]) c["critic"] = {{"checkpoint", o.critic}, {"step", opened[1]->step}};
  if (!o.reward.empty()) c["reward"] = {{"checkpoint", o.reward}, {"step", opened[2]->step}};
  if (!o.reward_rule.empty()) c["reward"] = {{"rule", o.reward_rule}, {"tokenizer", o.tokenizer}};
  if (!o.reward_cmd.empty()) c["reward"] = {{"command", o.reward_cmd}, {"tokenizer", o.tokenizer}};
  return c;
}

}  // namespace

int run_command(const CommandOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const ScoreSettings settings = settings_from(o);
  std::unique_ptr<TextReward> text_reward;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  if (!o.reward_rule.empty()) text_reward = make_rule_reward(o.reward_rule);
  if (!o.reward_cmd.empty()) {
    text_reward = make_command_reward(
        {.command = o.reward_cmd, .dir = o.reward_cmd_dir, .timeout_seconds = o.reward_cmd_timeout});
  }
  if (text_reward) tokenizer = tok::load_tokenizer(o.tokenizer);

  // Shards named on the command line are checked before any model is loaded.
  const bool from_stdin = o.inputs.size() == 1 && is_std_stream(o.inputs.front());
  std::uint64_t total_sequences = 0;
  if (!from_stdin) {
    for (const auto& in : o.inputs) total_sequences += std::uint64_t(io::probe_sample_shard(in).sequences);
  }

  auto be = backend::make_backend(o.device, o.threads);
  checkpoint::OpenedModel ref, critic, reward;
  if (!o.ref.empty()) ref = checkpoint::open_model(o.ref, *be, {}, /*need_lm_head=*/true, false, o.dtype);
  const bool use_critic = settings.algorithm == Algorithm::ppo;
  if (use_critic) critic = checkpoint::open_model(o.critic, *be, {}, false, /*need_value_head=*/true, o.dtype);
  if (!o.reward.empty()) reward = checkpoint::open_model(o.reward, *be, {}, false, /*need_value_head=*/true, o.dtype);
  log::info("scoring with {} ({} threads): ref {}, critic {}, reward {}", to_string(settings.algorithm),
            be->threads(), o.ref.empty() ? "none" : o.ref, use_critic ? o.critic : "none",
            !o.reward.empty() ? o.reward : !o.reward_rule.empty() ? "rule " + o.reward_rule : "command '" + o.reward_cmd + "'");

  BatchScorer scorer({.ref = ref.model.get(), .critic = critic.model.get(), .reward = reward.model.get(),
                             .text = text_reward.get(), .tokenizer = tokenizer.get()},
                            settings);
  Progress progress("scoring", total_sequences, "seq");
  ShardStream stream(
      scorer,
      {.out_dir = o.out_dir, .prefix = o.prefix, .created_by = o.command_line,
       .score_config = score_config(o, settings, {&ref, use_critic ? &critic : nullptr, &reward}),
       .samples_per_prompt = o.samples_per_prompt},
      [](const std::filesystem::path& out) { std::cout << out.string() << std::endl; }, &progress);

  if (from_stdin) {
    // One path a line, each scored the moment its line arrives (generation may still be running).
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      stream.add(line);
    }
  } else {
    for (const auto& in : o.inputs) stream.add(in);
  }
  stream.finish();
  scorer.finish();
  progress.finish();

  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& t = stream.totals();
  log::info("scored {} sequences ({} tokens) in {} shards, skipped {} already scored; mean reward {:.4f}", t.sequences,
            t.tokens, t.shards_scored, t.shards_skipped, t.sequences > 0 ? t.reward_sum / double(t.sequences) : 0.0);
  if (!o.stats.empty()) write_text_file(o.stats, stage_stats(scorer, t, wall).dump(2) + "\n");
  return 0;
}

}  // namespace braid::score
