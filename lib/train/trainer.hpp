// The single-process engine: each model a Trainer in this process.
//
// A Trainer is one model, its objective and its own AdamW. step() takes one
// mini-batch (sequence indices into a batch), splits it into micro-batches by token
// budget, and for each runs forward, objective.loss_and_grad(scale 1/units of the whole
// mini-batch), backward; then one AdamW step at the schedule's learning rate, clipped by
// global norm. How the mini-batch is split changes nothing but rounding.
// TrainerEngine runs several trainers on the same mini-batches (PPO's actor and critic
// each take one step per mini-batch) for train_epochs (train/engine.hpp).
//
// Data parallel (TrainerOptions::data_parallel.comm of dp > 1 ranks, every rank with the
// same model and the same batch): step(batch, indices) gives rank r the groups
// [G·r/dp, G·(r+1)/dp) of the mini-batch's G groups, in the mini-batch's order (a
// rank may get none), and cuts only those into micro-batches. The units the loss is a
// mean over are summed over the ranks first, so each rank's scale is 1 / (the whole
// mini-batch's units); AdamW (optim/adamw.hpp, ZeRO stage 1) then sums the gradients
// over the ranks, updates its shard and all-gathers the weights. The step's loss,
// metrics, tokens, sequences and micro-batches are the whole mini-batch's on every
// rank. The update is the single process's on the same mini-batch, to float rounding
// (sums taken in another order).
//
// Tensor parallel (a model built with ModelOptions::tp, docs/parallel.md): the ranks of
// its tp group run the same micro-batches through their slices; the data-parallel
// ranks are then those holding the same slices (comm::Mesh's cross group). The AdamW
// of each tp rank updates its slices and its copy of the replicated tensors, clipping
// by the norm over the whole model (optim/adamw.hpp).
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "train/engine.hpp"
#include "data/micro_batches.hpp"
#include "train/objective.hpp"
#include "train/options.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

class Trainer {
 public:
  // m must be a whole model (first and last stage) with the heads obj needs.
  Trainer(model::Model& m, Objective& obj, TrainerOptions opt);

  StepStats step(const io::SampleBatch& batch, std::span<const std::size_t> indices);
  // One optimizer step over a mini-batch already cut into micro-batches (data parallel:
  // this rank's part of it; empty is allowed).
  StepStats step(std::span<const io::SampleBatch> micro_batches);
  // The mean loss over the units of the given sequences, without changing anything
  // (the gradients are left zeroed). This process alone, also when data parallel.
  double evaluate(const io::SampleBatch& batch, std::span<const std::size_t> indices);

  model::Model& model() { return *m_; }
  optim::AdamW& optimizer() { return adamw_; }
  const TrainerOptions& options() const { return opt_; }
  // The schedule's end: the optimizer's global step where the decay reaches min_lr.
  void set_lr_total_steps(std::int64_t total) { opt_.lr.total_steps = total; }
  // The data-parallel ranks (nullptr: this process alone).
  comm::Communicator* data_parallel() const { return dp_; }
  // This rank's part of a mini-batch's indices (all of them when not data parallel).
  std::span<const std::size_t> local_indices(std::span<const std::size_t> indices) const;

 private:
  model::Model* m_;
  Objective* obj_;
  TrainerOptions opt_;
  comm::Communicator* dp_ = nullptr;
  optim::AdamW adamw_;
  model::Activations acts_;
};

struct NamedTrainer {
  std::string call;             // "actor_train", "critic_train"
  Trainer* trainer = nullptr;
};

class TrainerEngine final : public TrainingEngine {
 public:
  explicit TrainerEngine(std::vector<NamedTrainer> trainers) : trainers_(std::move(trainers)) {}
  std::vector<std::string> calls() const override;
  std::vector<StepStats> step(const io::SampleBatch& batch, std::span<const std::size_t> indices) override;
  void set_lr_steps_left(std::int64_t steps) override;

 private:
  std::vector<NamedTrainer> trainers_;
};

// train_epochs over a TrainerEngine of these trainers.
std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, std::span<const NamedTrainer> trainers,
                                     const LoopOptions& opt,
                                     const std::function<void(const std::string& call, const StepStats&)>& on_step = {});

}  // namespace braid::train
