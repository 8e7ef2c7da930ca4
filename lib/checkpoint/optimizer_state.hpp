// An optimizer's state beside a checkpoint: "<stem>.optim.h5" (or its stage files, the
// same split as the weights), a weight-shard file of kind "optimizer" holding
// "<param>.<moment>" (AdamW: exp_avg and exp_avg_sq) for every parameter of the stage
// and the optimizer's step count in meta.step. Any stage split loads into any other.
//
// The optimizer hands its state over as named moments: each a span of floats in the
// backend's memory running over every tensor of the model in m.tensors() order (the
// layout AdamW keeps its moments in). The adapter for optim::AdamW is
// train/optimizer_state.hpp; this room knows no optimizer.
//
// Tensor parallelism: a tp rank's state holds the moments of its slices, with tp_rank
// and tp_size set like its weights, at tp_path(optimizer_state_path(out), rank, size)
// ("ckpt.optim.tp1-of-2.h5"); a whole (tp 1) state loads into any tp rank (each moment
// read as the rank's slice), a state of another degree is joined and cut again.
#pragma once

#include "checkpoint/checkpoint.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

namespace braid::checkpoint {

// One per-parameter state of an optimizer: its name in the file ("exp_avg") and its
// values for every tensor of the model, back to back in m.tensors() order.
struct Moment {
  std::string name;
  std::span<float> values;
};

// "ckpt.h5" -> "ckpt.optim.h5" (stage files: stage_path of that).
std::filesystem::path optimizer_state_path(const std::filesystem::path& checkpoint);

// Writes the moments (over m.tensors()) and the step count atomically to `path`.
// std::invalid_argument when a moment's length is not the model's parameter count.
void save_optimizer_state(std::span<const Moment> moments, std::int64_t step, const model::Model& m,
                          const std::filesystem::path& path, const SaveInfo& info = {});

// Loads optimizer_state_path(checkpoint) (a file or its stage files) into the moments
// when it exists and returns its step count; nullopt (moments untouched) when there is
// none. InputError naming the file and tensor for a file of another kind, a missing
// tensor or a shape that differs from the model's. A state of another tp degree than the
// model's is read joined (checkpoint/whole_tensors.hpp).
std::optional<std::int64_t> load_optimizer_state(std::span<const Moment> moments, const model::Model& m,
                                                 const std::filesystem::path& checkpoint);
// The same from the state `state` itself (an optimizer-state file, or the stem of its stage
// files), wherever it lies: another run's, named by --optimizer-state.
std::optional<std::int64_t> load_optimizer_state_file(std::span<const Moment> moments, const model::Model& m,
                                                      const std::filesystem::path& state);

}  // namespace braid::checkpoint
