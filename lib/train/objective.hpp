// What a training step optimises, seen from the last pipeline stage.
//
// A trainer (single process, train/trainer.hpp, or the fused pipeline,
// train/pipeline.hpp) runs the model's forward over a micro-batch, hands the last
// stage's activations to the objective, and runs backward from what the objective
// left in acts.output_grad(). The objective alone knows the loss: PPO's clipped
// policy or value loss, GRPO, the reward model's pairwise loss, SFT.
//
//   model.forward({mb.tokens, mb.offsets}, acts);          // every stage, in order
//   LossStats s = objective.loss_and_grad(last, acts, mb, 1.0 / micro_batches);
//   model.backward(acts);                                  // every stage, in reverse
//
// Because the scale is passed in, k micro-batches accumulate into the gradient of
// the mean of their losses, and a pipeline computes the very gradient a single
// process does.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"

#include <map>
#include <string>

namespace braid::train {

struct LossStats {
  double loss = 0;        // the micro-batch's loss (unscaled)
  double weight = 0;      // what it is averaged over (tokens or sequences), for reporting
  std::map<std::string, double> metrics;  // objective-specific (clip fraction, KL, ...), unscaled
};

class Objective {
 public:
  virtual ~Objective() = default;

  // The heads the last stage needs (lm_head for a policy, value_head for a critic or
  // reward model); a trainer builds its models with these.
  virtual bool needs_lm_head() const = 0;
  virtual bool needs_value_head() const = 0;

  // After m.forward of the micro-batch mb (tokens, offsets and whatever per-token or
  // per-sequence arrays the objective reads), on the last stage m: adds
  // ∂(scale · loss)/∂output into acts.output_grad() and the heads' gradients, and
  // returns the unscaled loss and metrics. std::invalid_argument when mb lacks an array
  // the objective needs (naming it).
  virtual LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                  double scale) = 0;
};

}  // namespace braid::train
