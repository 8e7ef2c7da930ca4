// AdamW's state beside a checkpoint: "<stem>.optim.h5" (or its stage files, the same
// split as the weights), a weight-shard file of kind "optimizer" holding
// "<param>.exp_avg" and "<param>.exp_avg_sq" for every parameter of the stage and
// the optimizer's step count in meta.step. Any stage split loads into any other.
#pragma once

#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "train/checkpoint.hpp"

#include <filesystem>

namespace braid::train {

// "ckpt.h5" -> "ckpt.optim.h5" (stage files: stage_path of that).
std::filesystem::path optimizer_state_path(const std::filesystem::path& checkpoint);

// Writes the state of opt (built over m.tensors()) atomically to `path`.
void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const SaveInfo& info = {});

// Loads optimizer_state_path(checkpoint) (a file or its stage files) into opt when it
// exists; returns whether it did. InputError naming the file and tensor for a file of
// another kind, a missing tensor or a shape that differs from the model's.
bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint);

}  // namespace braid::train
