// What braid-train writes: new checkpoints with their optimizer state, and the
// --stats document (format braid.stagestats, stage "train").
#pragma once

#include "checkpoint/checkpoint.hpp"
#include "core/json.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "train/trainer.hpp"

#include <cstdint>
#include <string>
#include <filesystem>
#include <span>
#include <vector>

namespace braid::train {

// The optimizer state first (checkpoint::optimizer_state_path(out)), then the weights, each atomic:
// a checkpoint whose weights exist has its state too. Returns {weights, state}. Data
// parallel (opt over several ranks): collective, the writer is rank 0 of them (it alone
// gathers the whole state) and writes only if it passes write = true; every rank
// checks the weights are finite (they are the same). Tensor parallel (m a tp rank's
// slices): the files are this rank's, tp_path(out, rank, size) and
// tp_path(optimizer_state_path(out), rank, size). LoRA (m's adapters): the adapter file is
// out itself at any tp, whole (collective over the tp group, tp rank 0 writes it:
// checkpoint::save_adapters); the state is this rank's as above.
std::vector<std::filesystem::path> save_checkpoint(const model::Model& m, optim::AdamW& opt,
                                                   const std::filesystem::path& out, const checkpoint::SaveInfo& info,
                                                   bool write = true);

// Once every file of checkpoint `out` and of its optimizer state (`written`) exists: the
// files named like either in another layout (checkpoint::remove_other_layouts), left by an
// earlier run, removed and each removal logged. The lead rank calls it.
void remove_other_layouts(const std::filesystem::path& out, const std::vector<std::filesystem::path>& written);

// Whether `out` already holds weights of training step `step` and their optimizer
// state (a rerun of an interrupted command skips such an output).
bool checkpoint_complete(const std::filesystem::path& out, std::int64_t step);

// An output a command is about to write, with the record of what makes it (io/fingerprint.hpp).
struct PlannedOutput {
  std::filesystem::path out;
  ordered_json made_from;
};
// Whether every output is already there as this command makes it: weights and optimizer
// state, complete, whose record has the fingerprint of `made_from` (a rerun: training is
// skipped). false when one is missing or unfinished, or names an input checkpoint (trained
// in place), or, with force, was made from other inputs or options (logged). An output
// made from others without force is an InputError naming its file and every difference.
bool outputs_already_made(const std::vector<PlannedOutput>& outputs, const std::vector<std::filesystem::path>& inputs,
                          bool force);

// {"format":"braid.stagestats","version":1,"stage":"train","wall_seconds","sequences",
//  "tokens","calls":{"actor_train":{"seconds","tokens","tokens_per_second","steps",
//  "loss", mean metrics..., "per_step":[{"loss","grad_norm","lr","tokens","seconds",...}]}}}
json train_stats_json(double wall_seconds, std::int64_t sequences, std::int64_t tokens,
                      std::span<const CallRecord> calls);

}  // namespace braid::train
