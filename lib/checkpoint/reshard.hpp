// Resharding by files: a checkpoint written at one tensor-parallel degree rewritten at
// another, bit-exact (every value is copied, none computed). The files of every tp rank
// of the input (any stage split) are read; for each tensor the ranks' slices are joined
// along the tensor's split axis (model/tensor_parallel.hpp) into the whole tensor, which
// is cut again into tp_size slices, rank q's written to stage_path(tp_path(out, q,
// tp_size), s, S) with the input's stage split. Replicated tensors (norms, score.weight)
// must be the same on every input rank; they are copied once per output rank. An
// optimizer state (kind "optimizer": "<parameter>.<moment>" tensors, as braid-train
// writes it beside a checkpoint at tp > 1) is resharded the same way, each moment cut
// as its parameter.
//
//   reshard(checkpoint_files("run/actor.h5"), "run/actor-tp4.h5", 4, "braid reshard ...");
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace braid::checkpoint {

// Returns the files written. InputError (naming the file and tensor) for files that are
// not the weights (or the optimizer state) of one checkpoint (mixed degrees or kinds,
// a missing rank or stage, slices that do not join); UsageError when the model cannot be split tp_size ways.
std::vector<std::filesystem::path> reshard(const std::vector<std::filesystem::path>& files,
                                           const std::filesystem::path& out, int tp_size,
                                           const std::string& created_by);

}  // namespace braid::checkpoint
