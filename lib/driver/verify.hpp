// What a rerun keeps, checked before it is kept: a step whose outputs all exist and are
// newer than its inputs looks done, but a checkpoint can be truncated or damaged and a
// scored shard deleted after the run. These say what is wrong (nullopt: all good), so
// that `braid run` redoes that step, and through the file times every later one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "driver/layout.hpp"

namespace braid::driver {

// Every file given (each checkpoint spec as its file or stage files; files that do not
// exist are skipped) passes `braid check`: complete, readable, every checksum matching.
// The first problem found, naming its file.
std::optional<std::string> damaged_checkpoint(const std::vector<std::filesystem::path>& files);

// An iteration's scored shards: one for each of its sample shards (gen-K.h5 -> scored-K.h5),
// as many as score.stats.json counts (shards_scored + shards_skipped), each passing `braid check`.
// `damaged` receives the shards that are there but bad, to be removed before scoring again.
std::optional<std::string> damaged_scored_shards(const Layout& layout, int iteration,
                                                 std::vector<std::filesystem::path>* damaged);

}  // namespace braid::driver
