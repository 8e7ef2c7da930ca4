// AdamW's state through the checkpoint room's optimizer-state files
// (checkpoint/optimizer_state.hpp): its two moments as "exp_avg" and "exp_avg_sq",
// its step count as the file's step.
#pragma once

#include "checkpoint/optimizer_state.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"

#include <filesystem>

namespace braid::train {

// Writes the state of opt (built over m.tensors()) atomically to `path`.
void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const checkpoint::SaveInfo& info = {});

// Loads checkpoint::optimizer_state_path(checkpoint) (a file or its stage files) into opt
// when it exists; returns whether it did. InputError as checkpoint::load_optimizer_state.
bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint);

}  // namespace braid::train
