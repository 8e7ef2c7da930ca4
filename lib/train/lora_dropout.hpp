// LoRA dropout's draw for a training forward (model::DropoutDraw; model/lora.hpp): what makes
// a mask a function of the data and the optimizer step alone, so that a run draws the same
// masks however its mini-batches are cut into micro-batches, over ranks or pipeline stages.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <vector>

namespace braid::train {

// A micro-batch's draw: each sequence's key from its sample id and its tokens (what the
// sequence is, not where it sits), and the seed of the run (--seed) mixed with the optimizer
// step the forward belongs to. No keys when the model's adapters have no dropout.
class LoraDropout {
 public:
  LoraDropout(const model::Model& m, const io::SampleBatch& mb, std::uint64_t run_seed, std::int64_t step);
  // For model::Batch::dropout: nullptr when the model has no dropout.
  const model::DropoutDraw* draw() const { return keys_.empty() ? nullptr : &draw_; }

 private:
  std::vector<std::uint64_t> keys_;
  model::DropoutDraw draw_;
};

}  // namespace braid::train
