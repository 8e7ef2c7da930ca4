// DAPO's dynamic sampling, braid-train's half (Yu et al. 2025, §3.2): a group whose
// samples' rewards are all equal has advantage 0 on every token and only dilutes the
// batch, so it is dropped; braid run refills the batch with more prompts (docs/tools/run.md).
//
// A group is one prompt's samples: its stream position (the shard's generate config
// `first_prompt`, 0 when absent, plus sample_id / samples_per_prompt), so the shards of
// several rollouts of one iteration (braid run's refill rounds, each numbering its samples
// from 0) keep their groups apart. After dropping, at most max_groups groups are kept, the
// first in stream order.
#pragma once

#include "core/json.hpp"
#include "io/sample_batch.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace braid::train {

struct GroupFilterOptions {
  bool drop_equal = false;       // drop groups whose rewards are all equal
  std::int64_t max_groups = 0;   // keep at most this many groups (0: all)
  bool any() const { return drop_equal || max_groups > 0; }
};

struct GroupFilterSummary {
  std::int64_t groups = 0, kept = 0, all_equal = 0, beyond_max = 0;
  ordered_json to_json() const;
};

// Appends the group of each of batch's sequences from `first` on (those read from `shard`),
// from the shard's header. InputError naming the shard when its config says no
// samples_per_prompt.
void add_shard_groups(const std::filesystem::path& shard, const io::SampleBatch& batch, std::size_t first,
                      std::vector<std::int64_t>& group_of);

// Keeps batch's sequences of the groups that pass (in batch order). std::invalid_argument
// when group_of does not hold one entry per sequence; InputError when a group has no
// reward (an unscored shard).
GroupFilterSummary filter_groups(io::SampleBatch& batch, std::span<const std::int64_t> group_of,
                                 const GroupFilterOptions& opt);

}  // namespace braid::train
