// braid-train ppo|grpo --schedule schedule.json under mpirun: the fused pipeline
// (train/pipeline.hpp) as run_rl's session (train/rl_session.hpp), with the same inputs,
// mini-batches, outputs and --stats document as the single process.
//
// Every rank reads the shards named on the command line (not "-": under mpirun only one
// rank has stdin) and runs its stages; rank 0 prints the checkpoint files (the stage
// files of each model) and writes --stats. With --tp N the ranks are the schedule's
// devices x N (comm::Mesh): the tp ranks of a device split its stages N ways, and the
// pipeline's point to point runs in the cross group (tp rank r of one stage to tp rank r
// of the next); each tp rank writes its slice's stage files. Each mini-batch is cut into the schedule's
// K x M micro-batches; --micro-tokens caps their size (a larger one is a UsageError
// naming the way out). PPO trains the schedule's "actor" and "critic", GRPO its "actor".
#include "train/rl_session.hpp"

#include "backend/registry.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "checkpoint/optimizer_state.hpp"
#include "core/log.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"
#include "train/command_steps.hpp"
#include "train/commands.hpp"
#include "train/objectives.hpp"
#include "train/optimizer_state.hpp"
#include "train/pipeline.hpp"
#include "train/ranks.hpp"
#include "train/train_outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace braid::train {
namespace {

class FusedSession final : public RlSession {
 public:
  explicit FusedSession(const RlCommand& c)
      : c_(c), mpi_(nullptr, nullptr), world_(comm::mpi_world()), mesh_(*world_, c.common.tp),
        be_(backend::make_backend(c.common.device, c.common.threads)),
        policy_(actor_objective_options(c)),
        value_(c.value_clip) {
    // One rank tells the story; the others only warn (and stay quiet under -q). Progress
    // follows the level, so it is drawn once too.
    if (!lead()) log::set_level(std::min(log::level(), log::Level::warn));
    if (mesh_.tp_size() > 1 && !be_->host_accessible()) {
      throw UsageError(fmt::format("--tp {}: the {} backend's memory is not the host's, and the MPI communicator moves "
                                   "host memory: tensor parallelism across processes runs on --device cpu (device "
                                   "buffers need NCCL, not wired into braid-train yet)",
                                   mesh_.tp_size(), be_->name()));
    }
    // The pipeline's devices: the cross group (one rank per device); with one device a
    // group of this rank alone (split is collective: every rank takes this branch).
    if (mesh_.cross_group() == nullptr) own_cross_ = world_->split(mesh_.tp_rank(), 0);
    comm::Communicator& devices = mesh_.cross_group() ? *mesh_.cross_group() : *own_cross_;
    const model::TensorParallel tp{mesh_.tp_size(), mesh_.tp_rank(), mesh_.tp_group()};
    require_tp_splits(c.actor, tp.size);
    if (trains_critic(c)) require_tp_splits(c.critic, tp.size);
    const auto schedule = sched::load_schedule(load_json_file(c.schedule), c.schedule);
    const optim::AdamWConfig adamw{.weight_decay = c.common.weight_decay, .max_grad_norm = c.common.max_grad_norm};
    std::vector<PipelineModel> models{
        {"actor", c.actor, &policy_, adamw, c.common.dtype, steps::trained_lora(c.common, false), c.common.seed}};
    specs_ = {c.actor};
    outs_ = {c.actor_out};
    calls_ = {"actor_train"};
    lr_ = {c.common.lr};
    if (trains_critic(c)) {
      models.push_back(
          {"critic", c.critic, &value_, adamw, c.common.dtype, steps::trained_lora(c.common, true), c.common.seed});
      specs_.push_back(c.critic);
      outs_.push_back(c.critic_out);
      calls_.push_back("critic_train");
      lr_.push_back(c.critic_lr);
    }
    pipe_ = std::make_unique<FusedPipeline>(schedule, devices, *be_, models,
                                            PipelineOptions{.schedule_origin = c.schedule,
                                                            .tp = tp,
                                                            .max_tokens = c.common.micro_tokens,
                                                            .max_sequences = c.common.micro_tokens,
                                                            .recompute = c.common.recompute});
  }

  bool lead() const override { return world_->rank() == 0; }

  bool already_done(const std::vector<ordered_json>& made_from, bool force) override {
    std::vector<PlannedOutput> outputs;
    for (std::size_t i = 0; i < outs_.size(); ++i) outputs.push_back({outs_[i], made_from[i]});
    if (!outputs_already_made(outputs, {specs_.begin(), specs_.end()}, force)) return false;
    if (lead()) {
      for (std::size_t i = 0; i < outs_.size(); ++i) {
        log::info("{} is already complete, made from the same inputs and options: skipped", outs_[i]);
        for (const auto& f : weight_files(int(i))) std::cout << path_line(f.string()) << std::endl;
      }
    }
    return true;
  }

  void prepare(const std::vector<StateSource>& states) override {
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      const int m = static_cast<int>(i);
      steps::load_state(pipe_->optimizer(m), pipe_->stage(m), calls_[i], states[i]);
    }
    std::vector<optim::LrSchedule> lr;
    for (double peak : lr_) lr.push_back(steps::lr_schedule(c_.common, peak));
    engine_ = std::make_unique<PipelineEngine>(*pipe_, calls_, lr, c_.common.micro_tokens);
  }

  std::vector<model::ModelConfig> configs() const override {
    std::vector<model::ModelConfig> out;
    for (std::size_t i = 0; i < specs_.size(); ++i) out.push_back(pipe_->stage(int(i)).config());
    return out;
  }
  std::int64_t actor_step() const override { return pipe_->checkpoint_step(0); }
  std::vector<float> actor_logprobs(const io::SampleBatch&) override {
    throw UsageError("--tis-cap: not with --schedule (no rank holds the whole actor)");
  }
  std::string describe() const override {
    if (mesh_.tp_size() > 1) {
      return fmt::format("fused pipeline over {} devices x tp {} ({} ranks; {})", mesh_.devices(), mesh_.tp_size(),
                         world_->size(), c_.schedule);
    }
    return fmt::format("fused pipeline over {} ranks ({})", world_->size(), c_.schedule);
  }
  TrainingEngine& engine() override { return *engine_; }
  backend::Backend& backend() override { return *be_; }

  void save(const std::string& created_by, const std::vector<ordered_json>& made_from) override {
    std::vector<std::string> records;
    for (const auto& m : made_from) records.push_back(m.dump());
    // Weights that diverged (a learning rate too high): nothing written, exit 2 on every
    // rank (the peers wait in barriers; only ending the job frees them).
    for (std::size_t i = 0; i < outs_.size(); ++i) {
      const int m = static_cast<int>(i);
      if (pipe_->replica(m) != 0) continue;
      try {
        checkpoint::require_finite_weights(pipe_->stage(m), checkpoint::stage_path(own(outs_[i]), pipe_->stage_index(m), pipe_->stages(m)),
                                           pipe_->checkpoint_step(m) + 1);
      } catch (const InputError& e) {
        if (world_->size() == 1) throw;
        log::error("rank {}: {}", world_->rank(), e.what());
        world_->abort(2);
      }
    }
    // The optimizer state first, then the weights: a checkpoint whose weights exist has its state.
    // This rank's files appear together (CommitGroup) or not at all.
    CommitGroup outputs;
    for (std::size_t i = 0; i < outs_.size(); ++i) {
      const int m = static_cast<int>(i);
      if (pipe_->replica(m) != 0) continue;
      save_optimizer_state(pipe_->optimizer(m), pipe_->stage(m),
                           checkpoint::stage_path(own(checkpoint::optimizer_state_path(outs_[i])), pipe_->stage_index(m), pipe_->stages(m)),
                           {.step = pipe_->optimizer(m).steps_taken(), .created_by = created_by,
                            .made_from = records[i]});
    }
    world_->barrier();
    std::vector<std::filesystem::path> out_paths(outs_.begin(), outs_.end());
    const auto files = pipe_->save(out_paths, created_by, records);
    outputs.commit();
    world_->barrier();   // every tp rank's files exist before the lead names them
    if (lead()) {
      // Files of another layout under the same names (a whole file an earlier run left
      // beside these stage files) would be what the next reader loads: removed.
      std::vector<std::filesystem::path> written(files.begin(), files.end());
      for (std::size_t i = 0; i < outs_.size(); ++i) {
        const auto state = checkpoint::optimizer_state_path(outs_[i]);
        for (int r = 0; r < mesh_.tp_size(); ++r) {
          const auto mine = checkpoint::stage_paths(checkpoint::tp_path(state, r, mesh_.tp_size()),
                                                    pipe_->stages(static_cast<int>(i)));
          written.insert(written.end(), mine.begin(), mine.end());
        }
      }
      for (const auto& out : outs_) remove_other_layouts(out, written);
      for (const auto& f : files) std::cout << path_line(f.string()) << std::endl;
    }
  }

 private:
  // Model m's checkpoint files: every tp rank's stage files, or its one adapter file.
  std::vector<std::filesystem::path> weight_files(int m) const {
    if (pipe_->stage(m).options().lora.enabled()) return {outs_[std::size_t(m)]};
    std::vector<std::filesystem::path> out;
    for (int r = 0; r < mesh_.tp_size(); ++r) {
      for (const auto& f : checkpoint::stage_paths(checkpoint::tp_path(outs_[std::size_t(m)], r, mesh_.tp_size()),
                                                   pipe_->stages(m)))
        out.push_back(f);
    }
    return out;
  }
  // This tp rank's file of a checkpoint (before its stage split).
  std::filesystem::path own(const std::filesystem::path& out) const {
    return checkpoint::tp_path(out, mesh_.tp_rank(), mesh_.tp_size());
  }

  const RlCommand& c_;
  comm::MpiRuntime mpi_;
  std::unique_ptr<comm::Communicator> world_;
  comm::Mesh mesh_;
  std::unique_ptr<comm::Communicator> own_cross_;   // the devices' group when the mesh has one device
  std::unique_ptr<backend::Backend> be_;
  PolicyObjective policy_;
  ValueObjective value_;
  std::vector<std::string> specs_, outs_, calls_;
  std::vector<double> lr_;
  std::unique_ptr<FusedPipeline> pipe_;
  std::unique_ptr<PipelineEngine> engine_;
};

}  // namespace

std::unique_ptr<RlSession> make_fused_session(const RlCommand& c) { return std::make_unique<FusedSession>(c); }

}  // namespace braid::train
