// The fused actor + critic training pipeline (RLHFuse §5, intra-stage fusion): the
// models of a braid.schedule train at once as one bidirectional pipeline, every MPI
// rank (device d) holding one stage of every model, the stage the schedule's problem
// places there (sched::Problem::stage_on / replica_on: the actor's stage d, the
// reversed critic's stage N-1-d). One step executes device d's instruction stream:
//
//   RECV_F  wait for the activation in its receive buffer, copy it into the stage input
//   F       forward of the micro-batch on the stage (stage 0 embeds its tokens); on the
//           last stage the objective's loss_and_grad follows at once
//   SEND_F  the stage output to the next stage's device (nonblocking)
//   RECV_B  wait for the output gradient in its receive buffer
//   B       backward of the micro-batch
//   SEND_B  the input gradient to the previous stage's device (nonblocking)
//
// and then, per model: a sum all-reduce of the gradients over the replicas of each
// stage (fusion factor K > 1), the global gradient norm summed over the stages for
// clipping, and one AdamW step per stage. The receive buffers are the schedule's: one
// posted receive per buffer id, re-posted for the next tensor once its RECV consumed
// it, so memory in flight is what the schedule derived. Messages are tagged with the
// receiving subtask's id, so matching never depends on arrival order.
//
// Micro-batches: model m of the schedule runs K_m replicas x M_m micro-batches; the
// caller passes K_m x M_m micro-batches for it (every rank the same ones), and replica
// r takes micro-batches r*M_m .. (r+1)*M_m - 1. A schedule's spec makes K x M equal
// for every model, so actor and critic see the same mini-batch split the same number
// of ways: data::split_micro_batches(batch, indices, micro_batches(i)). Each
// micro-batch's loss is scaled by 1 / (the units of all K_m x M_m micro-batches:
// train/objective.hpp), which makes the update the one a single process computes over the
// same mini-batch, however either splits it.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "sched/schedule_json.hpp"
#include "train/engine.hpp"
#include "train/objective.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

struct PipelineModel {
  std::string name;                   // the schedule's model name ("actor", "critic")
  std::filesystem::path checkpoint;   // a file or its stage files, as checkpoint::open_model reads it
  Objective* objective = nullptr;     // the last stage's loss (not owned; outlives the pipeline)
  optim::AdamWConfig adamw;
  backend::DType dtype = backend::DType::f32;   // storage of the weights (masters in AdamW)
  // LoRA (model/lora.hpp): fresh adapters on a base checkpoint, A seeded by lora_seed (an
  // adapter file as the checkpoint keeps its own; these must then be off or the same), and
  // so are the draws of their dropout (train/lora_dropout.hpp). The stages train their
  // adapters alone, and save() gathers them into one adapter file.
  model::LoraOptions lora;
  std::uint64_t lora_seed = 0;
};

struct PipelineOptions {
  std::string schedule_origin = "schedule";  // how errors name the schedule (its path)
  // Tensor parallelism inside each stage (docs/parallel.md): this rank's slice and its tp
  // group (the tp ranks of its device). The pipeline's communicator is then the cross
  // group of comm::Mesh (one rank per device, all of this tp rank), so each tp rank
  // sends to the same tp rank of the next stage.
  model::TensorParallel tp;
  std::int64_t max_tokens = 4096;            // tokens of one micro-batch (activations, messages)
  std::int64_t max_sequences = 64;           // sequences of one micro-batch
  int recompute = 0;                         // model::ActivationOptions::recompute (--recompute)
};

struct PipelineModelResult {
  LossStats stats;            // loss and metrics over the mini-batch's units (LossTotals::mean)
  double grad_norm = 0;       // global, before clipping
  double clip = 1;            // the factor AdamW applied
  std::int64_t tokens = 0;    // tokens of all its micro-batches
  double compute_seconds = 0; // its F, loss and B time summed over every rank
};

// One rank's compute for one model in a step: its stage's forwards (with the objective on
// the last stage) and backwards, summed over the micro-batches it ran. What a profile of
// the stages measures, so a schedule's costs can come from a real step.
struct StageTimes {
  double forward_seconds = 0, backward_seconds = 0;
  int micro_batches = 0;
};

struct PipelineStepResult {
  std::vector<PipelineModelResult> models;  // in the order the models were given
  double wall_seconds = 0;                  // the slowest rank's step
  double stream_seconds = 0;                // the slowest rank's instruction stream (what a
                                            // schedule's makespan predicts: no optimizer step)
  double wait_seconds = 0;                  // time ranks spent blocked on receives, summed
};

class FusedPipeline {
 public:
  // Collective over comm. InputError (naming options.schedule_origin) when the schedule's
  // device count is not comm.size(), when its models and `models` differ by name, or when
  // a message tag would exceed what the communicator carries.
  FusedPipeline(const sched::LoadedSchedule& schedule, comm::Communicator& comm, backend::Backend& be,
                std::vector<PipelineModel> models, PipelineOptions options = {});
  ~FusedPipeline();
  FusedPipeline(const FusedPipeline&) = delete;
  FusedPipeline& operator=(const FusedPipeline&) = delete;

  // How many micro-batches model i (in the order given) needs per step: K x M.
  int micro_batches(int model) const;

  // One optimizer step. micro_batches[i]: model i's micro-batches; lr[i] its learning rate.
  // Collective; every rank passes the same batches. InputError naming the schedule when a
  // count differs from micro_batches(i); std::invalid_argument when a micro-batch is empty
  // or larger than the options allow. These are checked on every rank before any
  // message moves; a failure halfway through the stream (an objective refusing a
  // micro-batch) ends the whole job through comm.abort (exit 2 for bad input, else 1),
  // since the peers wait on this rank. On one rank it throws as usual.
  PipelineStepResult step(std::span<const std::vector<io::SampleBatch>> micro_batches, std::span<const double> lr);

  // Writes model i's stage of this rank to checkpoint::stage_path(outs[i], stage, stages) (replica 0
  // writes, the others hold copies; under tp each tp rank its slice,
  // stage_path(tp_path(outs[i], tp rank, tp), stage, stages)) with step = the input checkpoint's step + 1 (one
  // braid-train run, however many optimizer steps it took). With LoRA adapters: one whole
  // adapter file outs[i] (every stage's adapters, gathered whole over the tp group and then
  // the devices; rank 0 of tp rank 0 writes it), the file a single process writes.
  // Collective over the pipeline's communicator: returns once every file of this tp rank
  // exists; returns every file of the checkpoints (every tp rank's). made_from[i]: model
  // i's record of what made it (io/fingerprint.hpp), when given.
  std::vector<std::filesystem::path> save(std::span<const std::filesystem::path> outs,
                                          const std::string& created_by, std::span<const std::string> made_from = {});

  // This rank's stage of model i, and its optimizer (for checkpointing its state).
  model::Model& stage(int model);
  optim::AdamW& optimizer(int model);
  int stage_index(int model) const;
  int stages(int model) const;
  int replica(int model) const;
  std::int64_t checkpoint_step(int model) const;   // the input checkpoint's
  // This rank's stage of model i in the last step.
  StageTimes stage_times(int model) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The fused pipeline as train_epochs' engine (train/engine.hpp): each mini-batch cut into
// every model's K x M micro-batches (split_micro_batches), each model's learning rate
// from its schedule at its optimizer's step. UsageError when a mini-batch has fewer
// sequences than the schedule's micro-batches, or a micro-batch more than micro_tokens.
class PipelineEngine final : public TrainingEngine {
 public:
  PipelineEngine(FusedPipeline& pipe, std::vector<std::string> calls, std::vector<optim::LrSchedule> lr,
                 std::int64_t micro_tokens);
  std::vector<std::string> calls() const override { return calls_; }
  std::vector<StepStats> step(const io::SampleBatch& batch, std::span<const std::size_t> indices) override;
  void set_lr_steps_left(std::int64_t steps) override;

 private:
  FusedPipeline* pipe_;
  std::vector<std::string> calls_;
  std::vector<optim::LrSchedule> lr_;
  std::int64_t micro_tokens_;
};

}  // namespace braid::train
