// Resharding by files: a checkpoint written at one tensor-parallel degree and stage split
// rewritten at another, bit-exact (every value is copied, none computed). The input's
// tensors are read whole (checkpoint/whole_tensors.hpp: every tp rank's slices joined along
// the tensor's split axis, replicated tensors checked equal on every rank), placed on the
// output stage that holds them (decoder layer i on the stage of split_layers(L, S) that
// has it, the embedding on the first, the final norm and the heads on the last) and cut
// into tp_size slices, rank q's written to stage_path(tp_path(out, q, tp_size), s, S). An
// optimizer state (kind "optimizer": "<parameter>.<moment>" tensors, as braid-train
// writes it beside a checkpoint) is resharded the same way, each moment placed and cut as
// its parameter, so weights and their state move together.
//
//   reshard(checkpoint_files("run/actor.h5"), "run/actor-tp4.h5", {.tp = 4}, "braid reshard ...");
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace braid::checkpoint {

struct ReshardLayout {
  int tp = 0;      // tensor-parallel degree of the output; 0: the input's
  int stages = 0;  // pipeline stages of the output; 0: the input's
};

// Returns the files written. InputError (naming the file and tensor) for files that are
// not the weights (or the optimizer state) of one whole checkpoint (mixed degrees or kinds,
// a missing rank or stage, slices that do not join); UsageError when the model cannot be
// split tp ways or its layers into that many stages.
std::vector<std::filesystem::path> reshard(const std::vector<std::filesystem::path>& files,
                                           const std::filesystem::path& out, ReshardLayout layout,
                                           const std::string& created_by);

}  // namespace braid::checkpoint
