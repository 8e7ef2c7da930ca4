// What a real training step costs beyond the profile's tables (ReaL's per-layer sums):
// braid-train's Trainer (lib/train) running the PPO objectives on a whole model of the
// shape, on synthetic scored sequences, set against the tables' sum for the same
// micro-batches. Three steps: 16 sequences as 16 micro-batches, as 1, and 64 sequences as
// 1, separate what the tables leave out per micro-batch (splitting, the objective's
// arrays, the loss), per token and per optimizer step (AdamW, gradient norms), which the
// cost model then adds to every training micro-batch and step (ModelProfile::train_extra).
#pragma once

#include "backend/backend.hpp"
#include "plan/profile.hpp"

namespace braid::plan {

// `m` holds the tables already measured; fills m.train_extra. repeats: timed steps per
// configuration after one untimed one (the median is kept).
void measure_train_extra(ModelProfile& m, backend::Backend& be, int repeats);

}  // namespace braid::plan
