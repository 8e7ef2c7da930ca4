// The one training loop, and the interface it drives: "run one optimizer step over a
// mini-batch" for every model being trained.
//
// Two engines implement it: TrainerEngine (train/trainer.hpp: each model a Trainer in
// this process) and PipelineEngine (train/pipeline.hpp: the models as one fused
// pipeline across MPI ranks). train_epochs walks epochs x shuffled mini-batches the same
// way for both, so a run's mini-batches, and with the losses' normalisation
// (train/objective.hpp) its updates, do not depend on which engine runs it.
#pragma once

#include "io/sample_batch.hpp"
#include "train/options.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

struct StepStats {
  double loss = 0;                          // mean over the mini-batch's units (objective.hpp)
  double grad_norm = 0;                     // global norm before clipping
  double lr = 0;
  std::int64_t sequences = 0;
  std::int64_t tokens = 0;                  // tokens forwarded
  std::int64_t micro_batches = 0;
  double seconds = 0;                       // wall time of the whole step
  std::map<std::string, double> metrics;    // the objective's, over the mini-batch (LossTotals)
};

// Steps a call took, in order, and its totals.
struct CallRecord {
  std::string call;                         // "actor_train", "critic_train", "reward_train"
  std::vector<StepStats> steps;
  double seconds = 0;
  std::int64_t tokens = 0;
};

class TrainingEngine {
 public:
  virtual ~TrainingEngine() = default;
  // The calls it trains, in the order step() reports them.
  virtual std::vector<std::string> calls() const = 0;
  // One optimizer step of every model over the sequences `indices` of batch (whole
  // groups); one StepStats per call.
  virtual std::vector<StepStats> step(const io::SampleBatch& batch, std::span<const std::size_t> indices) = 0;
  // Each call's LR schedule decays to its end over `steps` more optimizer steps, counted
  // from the step its optimizer is at now (its state loaded): total_steps = that + steps.
  virtual void set_lr_steps_left(std::int64_t steps) = 0;
};

// Runs the engine on every mini-batch, epoch by epoch: epoch e shuffles the groups by
// Rng(seed, e), then takes runs of mini_batch sequences (0: all). on_step (if set) after
// each call's step. UsageError when the batch does not split into groups.
std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, TrainingEngine& engine, const LoopOptions& opt,
                                     const std::function<void(const std::string& call, const StepStats&)>& on_step = {});

// Optimizer steps train_epochs takes per call for a batch of `sequences` (for an LR schedule's total).
std::int64_t steps_per_call(std::size_t sequences, const LoopOptions& opt);

}  // namespace braid::train
