// braid-train ppo and grpo: scored shards into the actor (and critic), in one process or,
// with --schedule, as one fused pipeline under mpirun (train/rl_session.hpp).
#include "train/commands.hpp"

#include "checkpoint/adapters.hpp"

#include "backend/registry.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "rl/algorithms.hpp"
#include "rl/gae.hpp"
#include "rl/reference_logprobs.hpp"
#include "rl/tis.hpp"
#include "train/command_steps.hpp"
#include "train/group_filter.hpp"
#include "train/objectives.hpp"
#include "train/rl_session.hpp"
#include "train/staleness.hpp"
#include "train/train_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>

namespace braid::train {

using namespace steps;

namespace {

// The arguments with "-" replaced by the shard paths read from stdin (one a line).
std::vector<std::string> paths_from_stdin(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (a != "-") {
      out.push_back(a);
      continue;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) out.push_back(line);
    }
  }
  return out;
}

// Actor (and critic) as Trainers in this process; under mpirun, devices x tp
// (train/ranks.hpp).
class ProcessSession final : public RlSession {
 public:
  explicit ProcessSession(const RlCommand& c)
      : c_(c), ranks_(c.common.data_parallel, c.common.tp), be_(backend::make_backend(c.common.device, c.common.threads)) {
    ranks_.require_named_inputs(c.inputs, "shards");
    ranks_.use_device(*be_);
    const bool ppo = trains_critic(c);
    std::vector<TrainedCheckpoint> trained{{c.actor, "actor", ObjectiveKind::policy}};
    if (ppo) trained.push_back({c.critic, "critic", ObjectiveKind::value});
    predicted_ = require_device_memory(*be_, c.common, trained);
    actor_ = {open_for_ranks(c.actor, *be_, true, false, c.common, ranks_), nullptr, nullptr, c.actor, c.actor_out,
              "actor_train"};
    trainees_.push_back(&actor_);
    if (ppo) {
      critic_ = {open_for_ranks(c.critic, *be_, false, true, c.common, ranks_), nullptr, nullptr, c.critic,
                 c.critic_out, "critic_train"};
      trainees_.push_back(&critic_);
    }
  }
  bool lead() const override { return ranks_.lead(); }
  bool already_done(const std::vector<ordered_json>& made_from, bool force) override {
    for (std::size_t i = 0; i < trainees_.size(); ++i) trainees_[i]->made_from = made_from[i];
    return steps::already_done(trainees_, ranks_, force);
  }
  void prepare(const std::vector<StateSource>& states) override {
    const bool ppo = trains_critic(c_);
    for (std::size_t i = 0; i < trainees_.size(); ++i) trainees_[i]->state = states[i];
    attach(actor_, std::make_unique<PolicyObjective>(actor_objective_options(c_)),
           trainer_options(c_.common, c_.common.lr, 1, ranks_.comm()));
    if (ppo) {
      attach(critic_, std::make_unique<ValueObjective>(c_.value_clip),
             trainer_options(c_.common, c_.critic_lr, 1, ranks_.comm()));
    }
    engine_ = std::make_unique<TrainerEngine>(engine_of(trainees_));
  }
  std::vector<model::ModelConfig> configs() const override {
    std::vector<model::ModelConfig> out;
    for (const Trainee* t : trainees_) out.push_back(t->opened.model->config());
    return out;
  }
  std::int64_t actor_step() const override { return actor_.opened.step; }
  std::vector<float> actor_logprobs(const io::SampleBatch& b) override {
    return rl::reference_logprobs(*actor_.opened.model, b.tokens, b.offsets, c_.common.micro_tokens);
  }
  std::string describe() const override { return ranks_.describe(); }
  backend::Backend& backend() override { return *be_; }
  TrainingEngine& engine() override { return *engine_; }
  void save(const std::string& created_by, const std::vector<ordered_json>& made_from) override {
    for (std::size_t i = 0; i < trainees_.size(); ++i) trainees_[i]->made_from = made_from[i];
    log_device_peak(*be_, predicted_);
    save_all(trainees_, created_by, ranks_);
  }

 private:
  const RlCommand& c_;
  TrainingRanks ranks_;   // first: MPI is up before anything else and down after
  std::unique_ptr<backend::Backend> be_;
  Trainee actor_, critic_;
  std::vector<Trainee*> trainees_;
  std::unique_ptr<TrainerEngine> engine_;
  std::optional<memory::Prediction> predicted_;   // the device memory checked before loading (GPU)
};

}  // namespace

RlCommand rl_command(const std::string& algorithm) {
  const auto a = rl::algorithm_named(algorithm);
  if (!a) throw UsageError(fmt::format("unknown algorithm '{}' (algorithms: {})", algorithm, rl::algorithm_list()));
  RlCommand c;
  c.algorithm = a->name;
  c.preset_clip_low = a->clip_low;
  c.preset_clip_high = a->clip_high;
  c.kl_coef = a->kl_loss_coef;
  c.kl_estimator = rl::to_string(a->kl_loss_estimator);
  c.loss_agg = a->loss_agg;
  c.sequence_ratio = a->sequence_ratio;
  c.normalize_advantages = a->whiten;
  c.filter_groups = a->filter_groups;
  return c;
}

bool trains_critic(const RlCommand& c) {
  const auto a = rl::algorithm_named(c.algorithm);
  return a && a->critic;
}

PolicyObjectiveOptions actor_objective_options(const RlCommand& c) {
  PolicyObjectiveOptions o;
  o.loss.clip_low = c.clip_low.value_or(c.clip.value_or(c.preset_clip_low));
  o.loss.clip_high = c.clip_high.value_or(c.clip.value_or(c.preset_clip_high));
  for (const auto& [name, v] : {std::pair{"--clip-low", o.loss.clip_low}, std::pair{"--clip-high", o.loss.clip_high}}) {
    if (!(v > 0) || v > 100) throw UsageError(fmt::format("{}: is {}, must be in (0, 100]", name, v));
  }
  if (o.loss.clip_high < o.loss.clip_low) {
    throw UsageError(fmt::format("--clip-high: is {}, below --clip-low {}: clip-higher widens the range above 1, it "
                                 "does not narrow it",
                                 o.loss.clip_high, o.loss.clip_low));
  }
  o.loss.entropy_coef = c.entropy_coef;
  o.loss.kl_coef = c.kl_coef;
  const auto estimator = rl::kl_estimator_named(c.kl_estimator);
  if (!estimator) throw UsageError(fmt::format("--kl-estimator: '{}' is not k1, k2 or k3", c.kl_estimator));
  o.loss.kl_estimator = *estimator;
  const auto agg = aggregation_named(c.loss_agg);
  if (!agg) {
    throw UsageError(fmt::format("--loss-agg: '{}' is not token-mean, seq-mean-token-sum or seq-mean-token-mean",
                                 c.loss_agg));
  }
  o.aggregation = *agg;
  o.sequence_ratio = c.sequence_ratio;
  if (c.entropy_coef < 0) throw UsageError(fmt::format("--entropy-coef: is {}, must be >= 0", c.entropy_coef));
  if (c.kl_coef < 0) throw UsageError(fmt::format("--kl-coef: is {}, must be >= 0", c.kl_coef));
  if (c.tis_cap < 0) throw UsageError(fmt::format("--tis-cap: is {}, must be >= 0 (0: off)", c.tis_cap));
  return o;
}

std::vector<std::string> required_arrays(const RlCommand& c) {
  std::vector<std::string> required{"logprobs/actor", "advantages"};
  if (trains_critic(c)) required.insert(required.end(), {"values", "returns"});
  if (c.kl_coef != 0) required.push_back("logprobs/ref");
  return required;
}

void prepare_advantages(const RlCommand& c, backend::Backend& be, io::SampleBatch& b) {
  if (!c.normalize_advantages) return;
  if (!b.advantages) throw std::invalid_argument("prepare_advantages: the batch has no advantages");
  const rl::Whitening w = rl::whiten_advantages(be, {b.offsets, b.prompt_len}, *b.advantages);
  log::info("advantages normalised over {} response tokens (mean {:.4g}, std {:.4g})", w.tokens, w.mean, w.std);
}

int run_rl(const RlCommand& c) {
  const auto t0 = Clock::now();
  check_common(c.common);
  check_output_folders({c.actor_out, c.critic_out, c.common.stats});
  if (!rl::algorithm_named(c.algorithm)) {
    throw UsageError(fmt::format("unknown algorithm '{}' (algorithms: {})", c.algorithm, rl::algorithm_list()));
  }
  const bool ppo = trains_critic(c);
  if (ppo && (c.critic.empty() || c.critic_out.empty())) throw UsageError("ppo needs --critic and --critic-out");
  actor_objective_options(c);  // the options' problems now, before anything is read
  const bool fused = !c.schedule.empty();
  if (fused && std::find(c.inputs.begin(), c.inputs.end(), "-") != c.inputs.end()) {
    throw UsageError("--schedule: name the shards as arguments (under mpirun only one rank reads stdin)");
  }
  if (fused && c.tis_cap > 0) {
    throw UsageError("--tis-cap: not with --schedule (the fused pipeline holds no whole actor to recompute the "
                     "logprobs with)");
  }
  std::unique_ptr<RlSession> session = fused ? make_fused_session(c) : std::make_unique<ProcessSession>(c);
  // Where each model's AdamW state comes from, and the record each output gets.
  std::vector<StateSource> states{
      optimizer_state_source(c.common.optimizer_state, c.algorithm, c.actor, fresh_adapters(c.common, c.actor))};
  if (ppo) {
    states.push_back(optimizer_state_source(c.critic_optimizer_state, c.algorithm, c.critic,
                                            fresh_adapters(c.common, c.critic, true)));
  }
  auto made_from = [&](const std::vector<std::filesystem::path>& shards) {
    io::MadeFrom m = command_record(c.algorithm, c.common);
    checkpoint::add_checkpoint_input(m, "actor", c.actor);
    if (ppo) checkpoint::add_checkpoint_input(m, "critic", c.critic);
    m.add_input("shards", shards);
    std::vector<ordered_json> out{output_record(m, "actor", states[0])};
    if (ppo) out.push_back(output_record(m, "critic", states[1]));
    return out;
  };
  // An output already there is compared with what these shards make (paths on stdin are
  // read first): kept when the same made it, else refused or (--force) trained again.
  std::vector<std::string> inputs = c.inputs;
  if (checkpoint::checkpoint_exists(c.actor_out) || (ppo && checkpoint::checkpoint_exists(c.critic_out))) {
    inputs = paths_from_stdin(inputs);
    if (session->already_done(made_from({inputs.begin(), inputs.end()}), c.common.force)) return 0;
  }
  session->prepare(states);

  const auto configs = session->configs();
  Staleness staleness;
  const GroupFilterOptions filter{.drop_equal = c.filter_groups, .max_groups = c.max_groups};
  std::vector<std::int64_t> group_of;
  TrainingShards shards =
      read_training_shards(inputs, required_arrays(c), [&](const std::filesystem::path& p, const io::SampleBatch& b, std::size_t first) {
        if (filter.any()) add_shard_groups(p, b, first, group_of);
        // configs() holds the actor's, then the critic's (PPO): say which one is too small.
        for (std::size_t m = 0; m < configs.size(); ++m) {
          check_sequences_fit(b, first, configs[m], p.string(), m == 0 ? "actor" : "critic");
        }
        staleness.add(measure_staleness(b, first, session->actor_step(), c.max_staleness >= 0 ? std::optional(c.max_staleness) : std::nullopt, p.string()));
        log::debug("read {} ({} sequences so far)", p.string(), b.size());
      });
  log::info("{} sequences, {} tokens from {} shards (policy step {}; actor step {}); {}", shards.batch.size(),
            shards.batch.token_count(), shards.files.size(), shards.policy_step, session->actor_step(),
            session->describe());
  if (staleness.max > 0) {
    log::info("{} of {} response tokens come from older policies (at most {} steps behind the actor's {}, mean {:.3f}); "
              "each is weighted by the ratio to the logprob its own policy gave it",
              staleness.stale_tokens, staleness.tokens, staleness.max, session->actor_step(),
              staleness.to_json()["mean"].get<double>());
  }
  ordered_json extra = {{"staleness", staleness.to_json()}};
  if (filter.any()) {
    const GroupFilterSummary g = filter_groups(shards.batch, group_of, filter);
    log::info("{} of {} groups kept ({} dropped with all rewards equal, {} beyond --max-groups {}): {} sequences",
              g.kept, g.groups, g.all_equal, g.beyond_max, c.max_groups, shards.batch.size());
    if (g.kept == 0) log::warn("no group is left to train on: the actor is written unchanged, one step on");
    extra["groups"] = g.to_json();
  }
  prepare_advantages(c, session->backend(), shards.batch);
  if (c.tis_cap > 0) {
    // Before any update: the actor's own logprobs are the proximal policy the ratio is
    // taken against, and each token's policy term is weighed by min(π_old / μ, cap).
    const std::vector<float> proximal = session->actor_logprobs(shards.batch);
    const rl::TisSummary tis = rl::truncated_importance_sampling({shards.batch.offsets, shards.batch.prompt_len},
                                                                 proximal, *shards.batch.logprobs_actor, c.tis_cap,
                                                                 *shards.batch.advantages);
    shards.batch.logprobs_actor = proximal;
    log::info("truncated importance sampling (cap {}): mean weight {:.4f} over {} response tokens, {} truncated",
              c.tis_cap, tis.mean_weight, tis.tokens, tis.truncated);
    extra["tis"] = {{"cap", c.tis_cap}, {"mean_weight", tis.mean_weight}, {"truncated", tis.truncated},
                    {"tokens", tis.tokens}, {"max_abs_log_ratio", tis.max_abs_log_ratio}};
  }
  // Every group filtered out: no step to take, the actor is written as it was (one step on).
  const auto records = shards.batch.size() > 0 ? run_loop(shards.batch, session->engine(), loop_options(c.common, 1), c.common)
                                               : std::vector<CallRecord>{};
  session->save(c.common.created_by, made_from(shards.files));
  if (session->lead()) write_stats(c.common, t0, shards.batch, records, extra);
  return 0;
}

}  // namespace braid::train
