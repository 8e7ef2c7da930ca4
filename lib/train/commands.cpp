// braid-train ppo and grpo: scored shards into the actor (and critic), in one process or,
// with --schedule, as one fused pipeline under mpirun (train/rl_session.hpp).
#include "train/commands.hpp"

#include "backend/registry.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "rl/gae.hpp"
#include "train/command_steps.hpp"
#include "train/objectives.hpp"
#include "train/rl_session.hpp"
#include "train/staleness.hpp"
#include "train/train_inputs.hpp"

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
    const bool ppo = c.algorithm == "ppo";
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
    const bool ppo = c_.algorithm == "ppo";
    for (std::size_t i = 0; i < trainees_.size(); ++i) trainees_[i]->state = states[i];
    attach(actor_, std::make_unique<PolicyObjective>(ppo ? ppo_actor_options(c_.clip, c_.entropy_coef)
                                                         : grpo_actor_options(c_.clip, c_.kl_coef)),
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

std::vector<std::string> required_arrays(const RlCommand& c) {
  std::vector<std::string> required{"logprobs/actor", "advantages"};
  if (c.algorithm == "ppo") required.insert(required.end(), {"values", "returns"});
  if (c.algorithm == "grpo" && c.kl_coef != 0) required.push_back("logprobs/ref");
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
  const bool ppo = c.algorithm == "ppo";
  if (!ppo && c.algorithm != "grpo") throw UsageError("the algorithm is ppo or grpo, not " + c.algorithm);
  if (ppo && (c.critic.empty() || c.critic_out.empty())) throw UsageError("ppo needs --critic and --critic-out");
  const bool fused = !c.schedule.empty();
  if (fused && std::find(c.inputs.begin(), c.inputs.end(), "-") != c.inputs.end()) {
    throw UsageError("--schedule: name the shards as arguments (under mpirun only one rank reads stdin)");
  }
  std::unique_ptr<RlSession> session = fused ? make_fused_session(c) : std::make_unique<ProcessSession>(c);
  // Where each model's AdamW state comes from, and the record each output gets.
  std::vector<StateSource> states{optimizer_state_source(c.common.optimizer_state, c.algorithm, c.actor)};
  if (ppo) states.push_back(optimizer_state_source(c.critic_optimizer_state, c.algorithm, c.critic));
  auto made_from = [&](const std::vector<std::filesystem::path>& shards) {
    io::MadeFrom m = command_record(c.algorithm, c.common);
    m.add_input("actor", checkpoint::checkpoint_files(c.actor));
    if (ppo) m.add_input("critic", checkpoint::checkpoint_files(c.critic));
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
  TrainingShards shards =
      read_training_shards(inputs, required_arrays(c), [&](const std::filesystem::path& p, const io::SampleBatch& b, std::size_t first) {
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
  prepare_advantages(c, session->backend(), shards.batch);
  const auto records = run_loop(shards.batch, session->engine(), loop_options(c.common, 1), c.common);
  session->save(c.common.created_by, made_from(shards.files));
  if (session->lead()) write_stats(c.common, t0, shards.batch, records, {{"staleness", staleness.to_json()}});
  return 0;
}

}  // namespace braid::train
