// What a training step optimises, seen from the last pipeline stage.
//
// A trainer (single process, train/trainer.hpp, or the fused pipeline,
// train/pipeline.hpp) runs the model's forward over a micro-batch, hands the last
// stage's activations to the objective, and runs backward from what the objective
// left in acts.output_grad(). The objective alone knows the loss: PPO's clipped
// policy or value loss, GRPO, the reward model's pairwise loss, SFT.
//
// A loss is a mean over *units* of the whole mini-batch (response tokens for PPO, the
// critic and SFT; sequences for GRPO's mean of per-sequence means; pairs for the reward
// model), never over a micro-batch: the trainer first adds up units(mb) over every
// micro-batch of the mini-batch (every replica and rank alike), then
//
//   model.forward({mb.tokens, mb.offsets}, acts);                // every stage, in order
//   LossStats s = objective.loss_and_grad(last, acts, mb, 1.0 / total_units);
//   model.backward(acts);                                        // every stage, in reverse
//
// so the gradient is ∂(Σ_units ℓ / total_units) whatever the micro-batch split, the
// number of replicas or ranks. LossStats carries the micro-batch's unnormalised sum;
// LossTotals adds micro-batches up into the mini-batch's mean.
#pragma once

#include "comm/communicator.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"

#include <map>
#include <span>
#include <string>

namespace braid::train {

struct LossStats {
  double loss = 0;        // Σ over the micro-batch's units of each one's loss (not divided)
  double units = 0;       // the units it sums over (= the objective's units(mb))
  // Objective-specific (clip fraction, KL, ...): means over metric_units (< 0: over the
  // units; a policy loss summed per sequence reports token means); a name ending in
  // "_max" is a maximum instead.
  std::map<std::string, double> metrics;
  double metric_units = -1;
};

// Micro-batches' LossStats added up into their mini-batch's: loss and metrics as means
// over all units (metrics weighted by each micro-batch's metric units; "_max" ones by max).
class LossTotals {
 public:
  void add(const LossStats& s);
  // The running sums: Σ loss, Σ units, Σ metric units, and per metric Σ value · metric
  // units (or the max).
  const std::map<std::string, double>& metric_sums() const { return metrics_; }
  double loss_sum() const { return loss_; }
  double units() const { return units_; }
  double metric_units() const { return metric_units_; }
  // Adds sums of that form (another rank's, say) to these.
  void merge(double loss_sum, double units, double metric_units, const std::map<std::string, double>& metric_sums);
  // loss = Σ loss / Σ units; metrics likewise (0 when there are no units).
  LossStats mean() const;

  static bool is_max(const std::string& metric);

  // Every rank's totals added up in rank order (collective; the same result on every
  // rank, whatever metrics each rank saw: a rank with no units has none).
  static LossTotals over_ranks(comm::Communicator& comm, const LossTotals& mine);

 private:
  double loss_ = 0, units_ = 0, metric_units_ = 0;
  std::map<std::string, double> metrics_;   // Σ metric · metric units, or the max
};

class Objective {
 public:
  virtual ~Objective() = default;

  // The heads the last stage needs (lm_head for a policy, value_head for a critic or
  // reward model); a trainer builds its models with these.
  virtual bool needs_lm_head() const = 0;
  virtual bool needs_value_head() const = 0;

  // What the loss of micro-batch mb is a sum over: its response tokens, sequences with a
  // response, or pairs. Needs only tokens, offsets and prompt lengths (every rank of a
  // pipeline can count it). std::invalid_argument when mb cannot be cut into the units
  // (the reward model's odd sequence count).
  virtual double units(const io::SampleBatch& mb) const = 0;

  // After m.forward of the micro-batch mb (tokens, offsets and whatever per-token or
  // per-sequence arrays the objective reads), on the last stage m: adds
  // ∂(scale · Σ_units ℓ)/∂output into acts.output_grad() and the heads' gradients, and
  // returns the unscaled sum and the metrics. std::invalid_argument when mb lacks an
  // array the objective needs (naming it).
  virtual LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                  double scale) = 0;
};

// Σ units(mb) over micro-batches.
double total_units(const Objective& obj, std::span<const io::SampleBatch> micro_batches);

}  // namespace braid::train
