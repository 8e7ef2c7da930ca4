#include "score/command.hpp"

#include "backend/registry.hpp"
#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "comm/communicator.hpp"
#include "comm/device_group.hpp"
#include "comm/mesh.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "io/fingerprint.hpp"
#include "io/sample_shard.hpp"
#include "score/device_memory.hpp"
#include "score/ranks.hpp"
#include "score/shard_stream.hpp"
#include "score/stage_stats.hpp"
#include "score/text_reward.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

#include <unistd.h>

#include <cerrno>

namespace braid::score {

double default_kl_coef(const std::string& algorithm) {
  const auto a = rl::algorithm_named(algorithm);
  return a && a->kl_reward_coef ? *a->kl_reward_coef : 0.0;
}

namespace {

// An option set to other than its default where these settings never read it is refused,
// naming it: the user asked for something this does not do (the option audit,
// tests/audit/option_effects.tsv).
void refuse_unused(const CommandOptions& o, const ScoreSettings& s) {
  const CommandOptions d;
  const auto refuse = [&](bool set, const std::string& what) {
    if (set) throw UsageError(what + ": leave it out");
  };
  refuse(o.lambda != d.lambda && !s.uses_critic(),
         fmt::format("--lambda {}: only GAE (ppo) has a λ; --algorithm {} does not read it", o.lambda, s.algorithm));
  refuse(o.gamma != d.gamma && s.grouped(),
         fmt::format("--gamma {}: --algorithm {}'s group advantages take no discount", o.gamma, s.algorithm));
  refuse(o.std_eps != d.std_eps && !(s.estimator == rl::Estimator::group && s.std_normalize),
         fmt::format("--std-eps {}: only group advantages divided by the group's std read it (--algorithm {}{})",
                     o.std_eps, s.algorithm, s.estimator == rl::Estimator::group ? " with --no-norm-by-std" : ""));
  refuse(o.samples_per_prompt != d.samples_per_prompt && !s.grouped(),
         fmt::format("--samples-per-prompt {}: --algorithm {} has no groups", o.samples_per_prompt, s.algorithm));
  const bool overlong = s.overlong_buffer > 0 || (s.overlong_buffer < 0 && s.overlong_fraction > 0);
  refuse(o.overlong_penalty != d.overlong_penalty && !overlong,
         fmt::format("--overlong-penalty {}: no overlong shaping is on (--overlong-buffer N > 0 turns it on)",
                     o.overlong_penalty));
  refuse(o.reward_cmd_timeout != d.reward_cmd_timeout && o.reward_cmd.empty(),
         fmt::format("--reward-cmd-timeout {}: only with --reward-cmd", o.reward_cmd_timeout));
  const auto given = [&](const char* name) { return cli::was_given(o.options_given, name); };
  refuse((given("--kl-estimator") || o.kl_estimator != d.kl_estimator) && s.kl_coef == 0,
         fmt::format("--kl-estimator {}: the KL coefficient is 0 ({}), so there is no KL penalty to estimate",
                     o.kl_estimator,
                     o.kl_coef ? "--kl-coef 0"
                               : o.ref.empty() ? "no --ref" : fmt::format("--algorithm {}'s default", s.algorithm)));
}

}  // namespace

ScoreSettings settings_from(const CommandOptions& o) {
  const auto algorithm = rl::algorithm_named(o.algorithm);
  if (!algorithm) {
    throw UsageError(fmt::format("--algorithm: unknown '{}' (algorithms: {})", o.algorithm, rl::algorithm_list()));
  }
  ScoreSettings s;
  s.algorithm = o.algorithm;
  s.estimator = algorithm->estimator;
  s.std_normalize = o.std_normalize.value_or(algorithm->std_normalize);
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
  const auto estimator = rl::kl_estimator_named(o.kl_estimator);
  if (!estimator) throw UsageError(fmt::format("--kl-estimator: '{}' is not k1, k2 or k3", o.kl_estimator));
  s.kl_estimator = *estimator;
  s.kl_coef = o.kl_coef.value_or(o.ref.empty() ? 0.0 : default_kl_coef(o.algorithm));
  if (s.uses_critic()) {
    if (o.critic.empty()) throw UsageError("--algorithm ppo needs --critic (its values are GAE's baseline)");
  } else if (!o.critic.empty()) {
    // An option that would be ignored is refused: the user asked for something this does not do.
    throw UsageError(fmt::format("--algorithm {} uses no critic: leave out --critic {}", o.algorithm, o.critic));
  }
  if (o.std_normalize && s.estimator != rl::Estimator::group) {
    throw UsageError(fmt::format("--norm-by-std / --no-norm-by-std: --algorithm {} has no group-mean advantages to "
                                 "scale (grpo, dr-grpo, dapo, gspo, reinforce++-baseline have)",
                                 o.algorithm));
  }
  if (o.overlong_buffer && *o.overlong_buffer < 0) throw UsageError("--overlong-buffer must be >= 0 tokens (0: off)");
  if (!(o.overlong_penalty > 0)) throw UsageError("--overlong-penalty must be > 0");
  s.overlong_buffer = o.overlong_buffer.value_or(-1);
  s.overlong_fraction = algorithm->overlong_fraction;
  s.overlong_penalty = o.overlong_penalty;
  refuse_unused(o, s);
  return s;
}

namespace {

// This stage's settings as stored under "score" in each output's meta.config.
json score_config(const CommandOptions& o, const ScoreSettings& s, const std::vector<checkpoint::OpenedModel*>& opened) {
  json c;
  c["stage"] = "score";
  c["algorithm"] = s.algorithm;
  c["kl_coef"] = s.kl_coef;
  if (s.kl_coef != 0) c["kl_estimator"] = rl::to_string(s.kl_estimator);
  if (s.grouped()) {
    c["std_normalize"] = s.std_normalize;
    if (s.std_normalize) c["std_eps"] = s.std_eps;
  } else {
    c["gamma"] = s.gamma;
    if (s.uses_critic()) c["lambda"] = s.lambda;
  }
  if (s.overlong_buffer > 0 || (s.overlong_buffer < 0 && s.overlong_fraction > 0)) {
    c["overlong"] = {{"buffer", s.overlong_buffer > 0 ? json(s.overlong_buffer) : json(nullptr)},
                     {"fraction", s.overlong_buffer > 0 ? json(nullptr) : json(s.overlong_fraction)},
                     {"penalty", s.overlong_penalty}};
  }
  if (!o.ref.empty()) c["ref"] = {{"checkpoint", o.ref}, {"step", opened[0]->step}};
  if (!o.critic.empty() && opened[1]) c["critic"] = {{"checkpoint", o.critic}, {"step", opened[1]->step}};
  if (!o.reward.empty()) c["reward"] = {{"checkpoint", o.reward}, {"step", opened[2]->step}};
  if (!o.reward_rule.empty()) c["reward"] = {{"rule", o.reward_rule}, {"tokenizer", o.tokenizer}};
  if (!o.reward_cmd.empty()) c["reward"] = {{"command", o.reward_cmd}, {"tokenizer", o.tokenizer}};
  return c;
}

// What makes each output but its input shard (io/fingerprint.hpp): this stage's settings
// (`config`, as meta.config stores them), the reward, and the models by content.
io::MadeFrom score_record(const CommandOptions& o, const json& config, bool use_critic, bool text_reward) {
  io::MadeFrom m("braid-score");
  for (const auto& [key, value] : config.items()) {
    if (key == "stage" || value.is_object()) continue;
    m.set_option(key, value.is_string() ? value.get<std::string>() : cli::canonical_value(value.dump()));
  }
  if (!o.reward_rule.empty()) m.set_option("reward_rule", o.reward_rule);
  if (!o.reward_cmd.empty()) m.set_option("reward_cmd", o.reward_cmd);
  if (!o.ref.empty()) checkpoint::add_checkpoint_input(m, "ref", o.ref);
  if (use_critic) checkpoint::add_checkpoint_input(m, "critic", o.critic);
  if (!o.reward.empty()) checkpoint::add_checkpoint_input(m, "reward", o.reward);
  if (text_reward) m.add_tokenizer(o.tokenizer);
  m.set_output("scored");
  return m;
}

}  // namespace

struct ScoreSession::Parts {
  ScoreSettings settings;
  std::unique_ptr<TextReward> text_reward;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<backend::Backend> be;
  checkpoint::OpenedModel ref, critic, reward;
  std::unique_ptr<BatchScorer> scorer;
  std::optional<Progress> progress;
  std::unique_ptr<ShardStream> stream;
  std::optional<memory::Prediction> predicted;   // the device memory checked before loading
};

ScoreSession::ScoreSession(const CommandOptions& o, std::function<void(const std::filesystem::path&)> on_output,
                           std::optional<std::uint64_t> progress_total, model::TensorParallel tp)
    : p_(std::make_unique<Parts>()) {
  Parts& p = *p_;
  p.settings = settings_from(o);
  if (!o.reward_rule.empty()) p.text_reward = make_rule_reward(o.reward_rule);
  if (!o.reward_cmd.empty()) {
    p.text_reward = make_command_reward(
        {.command = o.reward_cmd, .dir = o.reward_cmd_dir, .timeout_seconds = o.reward_cmd_timeout});
  }
  if (p.text_reward) p.tokenizer = tok::load_tokenizer(o.tokenizer);

  p.be = backend::make_backend(o.device, o.threads);
  p.predicted = require_device_memory(*p.be, o, p.settings);   // before loading (a GPU; not the CPU)
  if (!o.ref.empty()) p.ref = checkpoint::open_model(o.ref, *p.be, {}, /*need_lm_head=*/true, false, o.dtype, tp);
  const bool use_critic = p.settings.uses_critic();
  if (use_critic) p.critic = checkpoint::open_model(o.critic, *p.be, {}, false, /*need_value_head=*/true, o.dtype, tp);
  if (!o.reward.empty()) {
    p.reward = checkpoint::open_model(o.reward, *p.be, {}, false, /*need_value_head=*/true, o.dtype, tp);
  }
  if (tp.rank == 0) {
    log::info("scoring with {} ({} threads{}): ref {}, critic {}, reward {}", p.settings.algorithm,
              p.be->threads(), tp.size > 1 ? fmt::format(", models split over tp {}", tp.size) : "", o.ref.empty() ? "none" : o.ref, use_critic ? o.critic : "none",
              !o.reward.empty() ? o.reward
              : !o.reward_rule.empty() ? "rule " + o.reward_rule
                                       : "command '" + o.reward_cmd + "'");
  }

  p.scorer = std::make_unique<BatchScorer>(
      ScoreModels{.ref = p.ref.model.get(), .critic = p.critic.model.get(), .reward = p.reward.model.get(),
                  .text = p.text_reward.get(), .tokenizer = p.tokenizer.get(), .tp_group = tp.group},
      p.settings);
  if (progress_total) p.progress.emplace("scoring", *progress_total, "seq");
  const json config = score_config(o, p.settings, {&p.ref, use_critic ? &p.critic : nullptr, &p.reward});
  p.stream = std::make_unique<ShardStream>(
      *p.scorer,
      StreamOptions{.out_dir = o.out_dir, .prefix = o.prefix, .created_by = o.command_line, .score_config = config,
                    .samples_per_prompt = o.samples_per_prompt, .tp_group = tp.group,
                    .made_from = score_record(o, config, use_critic, p.text_reward != nullptr)},
      std::move(on_output), p.progress ? &*p.progress : nullptr);
}

ScoreSession::~ScoreSession() = default;

void ScoreSession::add(const std::string& shard) { p_->stream->add(shard); }

void ScoreSession::finish() {
  p_->stream->finish();
  p_->scorer->finish();
  if (p_->progress) p_->progress->finish();
  if (p_->predicted) memory::log_peak(*p_->be, *p_->predicted);
}

const StreamTotals& ScoreSession::totals() const { return p_->stream->totals(); }

ordered_json ScoreSession::stats(double wall_seconds) const {
  return stage_stats(*p_->scorer, p_->stream->totals(), wall_seconds);
}

void print_path_line(const std::string& path) { write_stdout_line(path_line(path), "a scored shard's path"); }

int run_command(const CommandOptions& o, comm::Communicator* world) {
  const auto t0 = std::chrono::steady_clock::now();
  const ScoreSettings settings = settings_from(o);
  const bool from_stdin = o.inputs.size() == 1 && is_std_stream(o.inputs.front());
  const bool ranks = world != nullptr && world->size() > 1;
  if (ranks && from_stdin) {
    throw UsageError("'-' (shard paths on stdin) does not work under mpirun: only rank 0 has stdin; "
                     "give the shard files");
  }
  if (o.tp < 1) throw UsageError(fmt::format("--tp must be at least 1, got {}", o.tp));
  if (o.tp > 1 && !world) {
    throw UsageError(fmt::format("--tp {} splits the models over {} ranks: start them with mpirun -np {} (or a "
                                 "multiple of {})", o.tp, o.tp, o.tp, o.tp));
  }
  // On a GPU the tp groups move device buffers (every block's all-reduce): over a group
  // that takes them (NCCL, or staged over MPI; comm/device_group.hpp). Without tp the
  // devices exchange host memory only (their figures).
  std::unique_ptr<comm::Communicator> gpus;
  if (world && o.tp > 1) {
    const backend::BackendSpec spec = backend::parse_device_option(o.device);
    if (spec.kind == backend::DeviceKind::cuda) {
      if (const std::string why = backend::cuda_unavailable_reason(); !why.empty())
        throw UsageError(fmt::format("--device {}: {}", spec.to_string(), why));
      gpus = comm::cuda_group(*world, spec.device);
    }
  }
  // Ranks = devices x tp (tp fastest): a device's ranks score its shards together.
  comm::Mesh mesh = world ? comm::Mesh(gpus ? *gpus : *world, o.tp) : comm::Mesh();
  const bool devices = mesh.devices() > 1;
  const bool writer = mesh.tp_rank() == 0;

  // Shards named on the command line are checked before any model is loaded; under
  // mpirun each device takes its part (whole GRPO groups).
  std::vector<std::string> mine = o.inputs;
  if (devices) mine = inputs_of_rank(o, settings, mesh.device(), mesh.devices());
  std::uint64_t total_sequences = 0;
  if (!from_stdin) {
    for (const auto& in : mine) total_sequences += std::uint64_t(io::probe_sample_shard(in).sequences);
  }

  ScoreSession session(
      o, [](const std::filesystem::path& out) { print_path_line(out.string()); },
      ranks && world->rank() != 0 ? std::nullopt : std::optional<std::uint64_t>(total_sequences),
      {.size = mesh.tp_size(), .rank = mesh.tp_rank(), .group = mesh.tp_group()});

  if (from_stdin) {
    // One path a line, each scored the moment its line arrives (generation may still be running).
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      session.add(path_from_line(line, "<stdin>"));
    }
  } else {
    for (const auto& in : mine) session.add(in);
  }
  session.finish();

  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& t = session.totals();
  if (writer) {
    log::info("{}scored {} sequences ({} tokens) in {} shards, skipped {} already scored; mean reward {:.4f}",
              devices ? fmt::format("{} {}: ", mesh.tp_size() > 1 ? "device" : "rank", mesh.device()) : "",
              t.sequences, t.tokens, t.shards_scored, t.shards_skipped,
              t.sequences > 0 ? t.reward_sum / double(t.sequences) : 0.0);
  }
  ordered_json stats = session.stats(wall);
  if (ranks) {
    // Every device's figures (its tp rank 0's, over the cross group) to rank 0, which
    // writes them; the others wait (asleep) for it to finish.
    if (writer && devices) {
      const auto all = gather_on_root(*mesh.cross_group(), stats.dump(), 0);
      if (world->rank() == 0) {
        std::vector<ordered_json> docs;
        for (const auto& text : all) docs.push_back(ordered_json::parse(text));
        stats = merge_stage_stats(docs);
      }
    }
    if (world->rank() == 0) {
      if (mesh.tp_size() > 1) stats["tp"] = mesh.tp_size();
      if (!o.stats.empty()) write_text_file(o.stats, stats.dump(2) + "\n");
    }
    release_from_root(*world, 0);
    return 0;
  }
  if (!o.stats.empty()) write_text_file(o.stats, stats.dump(2) + "\n");
  return 0;
}

}  // namespace braid::score
