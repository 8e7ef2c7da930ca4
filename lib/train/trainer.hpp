// The single-process training loop: epochs × shuffled mini-batches × micro-batches.
//
// A Trainer is one model, its objective and its own AdamW. step() takes one
// mini-batch (sequence indices into a batch), splits it into micro-batches by token
// budget, and for each runs forward, objective.loss_and_grad(scale 1/k), backward;
// then one AdamW step at the schedule's learning rate, clipped by global norm.
// train_epochs() drives several trainers over the same mini-batches: PPO's actor and
// critic each take one step per mini-batch.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "train/micro_batches.hpp"
#include "train/objective.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

struct TrainerOptions {
  optim::AdamWConfig adamw;
  optim::LrSchedule lr;
  MicroBatchLimits micro;
};

struct StepStats {
  double loss = 0;                          // mean over the micro-batches of each one's loss
  double grad_norm = 0;                     // global norm before clipping
  double lr = 0;
  std::int64_t sequences = 0;
  std::int64_t tokens = 0;                  // tokens forwarded
  std::int64_t micro_batches = 0;
  double seconds = 0;                       // wall time of the whole step
  std::map<std::string, double> metrics;    // the objective's, mean over micro-batches
};

class Trainer {
 public:
  // m must be a whole model (first and last stage) with the heads obj needs.
  Trainer(model::Model& m, Objective& obj, TrainerOptions opt);

  StepStats step(const io::SampleBatch& batch, std::span<const std::size_t> indices);
  // The mean loss over micro-batches of the given sequences, without changing anything
  // (the gradients are left zeroed).
  double evaluate(const io::SampleBatch& batch, std::span<const std::size_t> indices);

  model::Model& model() { return *m_; }
  optim::AdamW& optimizer() { return adamw_; }
  const TrainerOptions& options() const { return opt_; }

 private:
  model::Model* m_;
  Objective* obj_;
  TrainerOptions opt_;
  optim::AdamW adamw_;
  model::Activations acts_;
};

struct LoopOptions {
  int epochs = 1;
  std::size_t mini_batch = 0;   // sequences per optimizer step; 0: all of them (one step per epoch)
  std::uint64_t seed = 0;       // the shuffle of epoch e is Rng(seed, e)
  std::size_t group = 1;        // sequences that stay together (RM pairs)
};

struct NamedTrainer {
  std::string call;             // "actor_train", "critic_train"
  Trainer* trainer = nullptr;
};

// Steps a trainer took, in order, and its totals.
struct CallRecord {
  std::string call;
  std::vector<StepStats> steps;
  double seconds = 0;
  std::int64_t tokens = 0;
};

// Runs every trainer on every mini-batch, epoch by epoch; on_step (if set) after each
// step. UsageError when the batch does not split into groups.
std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, std::span<const NamedTrainer> trainers,
                                     const LoopOptions& opt,
                                     const std::function<void(const std::string& call, const StepStats&)>& on_step = {});

// Optimizer steps train_epochs takes for a batch of `sequences` (for an LR schedule's total).
std::int64_t steps_per_call(std::size_t sequences, const LoopOptions& opt);

}  // namespace braid::train
