// The --stats file of braid-score: {"format":"braid.stagestats","version":1,"stage":"score",...}
// with the calls named as braid-meshplan's plan names them (ref_inf, critic_inf,
// reward_inf), so that predicted and measured times can be set side by side.
#pragma once

#include "core/json.hpp"
#include "score/batch_scorer.hpp"
#include "score/shard_stream.hpp"

#include <span>

namespace braid::score {

ordered_json stage_stats(const BatchScorer& scorer, const StreamTotals& totals, double wall_seconds);

// Several ranks' documents (by rank) as one: counts and call times summed (a call's
// seconds are then compute time over the ranks), means weighted by what they average
// over, wall_seconds the longest, and "ranks": each rank's wall_seconds, sequences,
// shards_scored, shards_skipped and busy seconds (its calls' seconds summed).
ordered_json merge_stage_stats(std::span<const ordered_json> ranks);

}  // namespace braid::score
