// The --stats file of braid-score: {"format":"braid.stagestats","version":1,"stage":"score",...}
// with the calls named as braid-meshplan's plan names them (ref_inf, critic_inf,
// reward_inf), so that predicted and measured times can be set side by side.
#pragma once

#include "core/json.hpp"
#include "score/batch_scorer.hpp"
#include "score/shard_stream.hpp"

namespace braid::score {

ordered_json stage_stats(const BatchScorer& scorer, const StreamTotals& totals, double wall_seconds);

}  // namespace braid::score
