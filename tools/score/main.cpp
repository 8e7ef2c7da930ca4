// braid-score: the reference, critic and reward passes over sample shards, then PPO's
// KL-penalised GAE or GRPO's group advantages -> scored shards (docs/tools/score.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "io/sample_shard.hpp"
#include "score/batch_scorer.hpp"
#include "score/rule_reward.hpp"
#include "score/shard_stream.hpp"
#include "score/stage_stats.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/checkpoint.hpp"

namespace {

using namespace braid;

struct Options {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string ref, critic, reward, reward_rule;
  std::string tokenizer = "byte";
  std::string algorithm = "ppo";
  std::optional<double> kl_coef;
  double gamma = 1.0;
  double lambda = 0.95;
  double std_eps = 1e-6;
  std::int64_t samples_per_prompt = 0;
  std::int64_t micro_tokens = 4096;
  std::string prefix = "scored";
  int threads = 0;
  std::string stats;
  std::string command_line;
};

constexpr double kDefaultKlCoef = 0.05;

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                        std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The combinations of flags, checked before any model is loaded.
score::ScoreSettings settings_of(const Options& o) {
  score::ScoreSettings s;
  s.algorithm = o.algorithm == "grpo" ? score::Algorithm::grpo : score::Algorithm::ppo;
  s.gamma = o.gamma;
  s.lambda = o.lambda;
  s.std_eps = o.std_eps;
  s.micro_tokens = o.micro_tokens;
  if (o.reward.empty() == o.reward_rule.empty()) throw UsageError("give one of --reward CKPT and --reward-rule RULE");
  if (o.inputs.size() > 1 && std::find(o.inputs.begin(), o.inputs.end(), "-") != o.inputs.end()) {
    throw UsageError("'-' (shard paths on stdin) stands alone: give either '-' or shard files");
  }
  if (o.kl_coef && *o.kl_coef > 0 && o.ref.empty()) {
    throw UsageError(fmt::format("--kl-coef {} needs --ref (the KL penalty is against the reference model); "
                                 "without a reference, leave --kl-coef out or set it to 0", *o.kl_coef));
  }
  if (s.algorithm == score::Algorithm::ppo) {
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

json score_config(const Options& o, const score::ScoreSettings& s, const std::vector<train::OpenedModel*>& opened) {
  json c;
  c["stage"] = "score";
  c["algorithm"] = score::to_string(s.algorithm);
  if (s.algorithm == score::Algorithm::ppo) {
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
  return c;
}

int run(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const score::ScoreSettings settings = settings_of(o);
  std::optional<score::RuleReward> rule;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  if (!o.reward_rule.empty()) {
    rule = score::RuleReward::parse(o.reward_rule);
    tokenizer = tok::load_tokenizer(o.tokenizer);
  }

  // Shards named on the command line are checked before any model is loaded.
  const bool from_stdin = o.inputs.size() == 1 && is_std_stream(o.inputs.front());
  std::uint64_t total_sequences = 0;
  if (!from_stdin) {
    for (const auto& in : o.inputs) total_sequences += std::uint64_t(io::probe_sample_shard(in).sequences);
  }

  auto be = backend::make_cpu_backend(o.threads);
  train::OpenedModel ref, critic, reward;
  if (!o.ref.empty()) ref = train::open_model(o.ref, *be, {}, /*need_lm_head=*/true, false);
  const bool use_critic = settings.algorithm == score::Algorithm::ppo;
  if (use_critic) critic = train::open_model(o.critic, *be, {}, false, /*need_value_head=*/true);
  if (!o.reward.empty()) reward = train::open_model(o.reward, *be, {}, false, /*need_value_head=*/true);
  log::info("scoring with {} ({} threads): ref {}, critic {}, reward {}", score::to_string(settings.algorithm),
            be->threads(), o.ref.empty() ? "none" : o.ref, use_critic ? o.critic : "none",
            o.reward.empty() ? "rule " + o.reward_rule : o.reward);

  score::BatchScorer scorer({.ref = ref.model.get(), .critic = critic.model.get(), .reward = reward.model.get(),
                             .rule = rule ? &*rule : nullptr, .tokenizer = tokenizer.get()},
                            settings);
  Progress progress("scoring", total_sequences, "seq");
  score::ShardStream stream(
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
  progress.finish();

  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& t = stream.totals();
  log::info("scored {} sequences ({} tokens) in {} shards, skipped {} already scored; mean reward {:.4f}", t.sequences,
            t.tokens, t.shards_scored, t.shards_skipped, t.sequences > 0 ? t.reward_sum / double(t.sequences) : 0.0);
  if (!o.stats.empty()) write_text_file(o.stats, score::stage_stats(scorer, t, wall).dump(2) + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Score sample shards for RL: reference logprobs, critic values and rewards, then PPO's "
               "KL-penalised GAE (or GRPO's group advantages). Prints each scored shard's path on stdout as it "
               "is written.",
               "braid-score"};
  Options o;
  app.add_option("shards", o.inputs, "Sample shards (braid-generate's), or '-' to read their paths from stdin, "
                                     "one a line, scoring each as it arrives")
      ->required();
  app.add_option("-o,--output", o.out_dir, "Folder for the scored shards (made if missing)")->required();
  app.add_option("--ref", o.ref, "Reference model checkpoint (LM head): adds /logprobs/ref and the KL penalty");
  app.add_option("--critic", o.critic, "Critic checkpoint (value head): adds /values (PPO)");
  app.add_option("--reward", o.reward, "Reward model checkpoint (value head at the last token)");
  app.add_option("--reward-rule", o.reward_rule,
                 "A built-in reward instead of a model: digits, chars:SET, length:N, regex:RE");
  app.add_option("--tokenizer", o.tokenizer, "Tokenizer that decodes responses for --reward-rule (byte or a "
                                             "tokenizer.json)")->capture_default_str();
  app.add_option("--algorithm", o.algorithm, "ppo (critic + GAE) or grpo (group advantages, no critic)")
      ->check(CLI::IsMember({"ppo", "grpo"}))->capture_default_str();
  app.add_option("--kl-coef", o.kl_coef,
                 "PPO per-token KL penalty coefficient (default 0.05 with --ref, 0 without)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gamma", o.gamma, "GAE discount")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--lambda", o.lambda, "GAE lambda")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--std-eps", o.std_eps, "GRPO: advantage = (reward - group mean) / (group std + this)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--samples-per-prompt", o.samples_per_prompt,
                 "GRPO group size (default: samples_per_prompt of the shards' generate config)")
      ->check(CLI::PositiveNumber);
  app.add_option("--micro-tokens", o.micro_tokens, "Tokens in one forward pass of a model")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--prefix", o.prefix, "Output names: PREFIX-<index of the input>.h5")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads (0: all cores of this process)")->capture_default_str();
  app.add_option("--stats", o.stats, "Write timings (braid.stagestats JSON: ref_inf, critic_inf, reward_inf) here");
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + shell_quote(i ? argv[i] : "braid-score");
  return braid::cli::run(app, argc, argv, [&] { return run(o); });
}
