// AdamW's state through the checkpoint room's optimizer-state files
// (checkpoint/optimizer_state.hpp): its two moments as "exp_avg" and "exp_avg_sq",
// its step count as the file's step. A file always holds the whole moments, so a state
// written by a data-parallel run (optim/adamw.hpp: each rank holds a shard) loads into
// any number of ranks, and into the single process, and back.
#pragma once

#include "checkpoint/optimizer_state.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace braid::train {

// Writes the state of opt (built over m.tensors()) atomically to `path`. Data parallel:
// collective (the shards are gathered), and only a rank passing write = true writes.
void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const checkpoint::SaveInfo& info = {}, bool write = true);

// Loads checkpoint::optimizer_state_path(checkpoint) (a file or its stage files) into opt
// when it exists; returns whether it did (data parallel: every rank reads the file and
// keeps its shard). InputError as checkpoint::load_optimizer_state.
bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint);
// The same from the state `state` itself (checkpoint::load_optimizer_state_file).
bool load_optimizer_state_file(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& state);

// Where a trained model's AdamW state comes from (--optimizer-state): the state to load,
// or none (AdamW starts from zero), and why, for the log.
struct StateSource {
  std::optional<std::filesystem::path> state;   // an optimizer-state file or the stem of its stage files
  std::string why;
};
// `option` for a model braid-train `mode` ("ppo", "sft", ...) trains from `checkpoint`:
// "fresh"; "auto": the state beside the checkpoint when that mode of braid-train made the
// checkpoint (its made_from record says so: a run going on), none when another tool or
// mode made it (a new stage: DPO or PPO after SFT) or when there is none; otherwise the
// path of a state, or of a checkpoint whose state lies beside it (InputError naming the
// option when there is none). `fresh_adapters` (enabled): new LoRA adapters trained on the
// checkpoint, a base, so "auto" starts from zero (the state beside a base is the base's).
StateSource optimizer_state_source(const std::string& option, const std::string& mode,
                                   const std::filesystem::path& checkpoint, const model::LoraOptions& fresh_adapters = {});

}  // namespace braid::train
