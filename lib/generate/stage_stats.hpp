// braid-generate's --stats file (format braid.stagestats, version 1): the figures
// of every rank, summed, with the migration if there was one. The call name
// `actor_gen` is the one braid-meshplan's plan uses, so predicted and measured
// times can be set side by side.
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace braid::gen {

struct RankStats {
  int rank = 0;
  std::string role = "generate";      // "generate", "handed over" (a migration sender), "received"
  std::int64_t sequences = 0;         // samples finished here
  std::int64_t tokens = 0;            // their prompt + response tokens
  std::int64_t response_tokens = 0;
  std::int64_t prefill_tokens = 0;    // prompt (and continuation) tokens prefilled
  std::int64_t steps = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double generate_seconds = 0;        // wall time from the first step to this rank's last sample
  std::int64_t shards_written = 0;
  std::int64_t shards_skipped = 0;    // complete from an earlier run
  std::int64_t handed_over = 0;       // unfinished samples sent away (migration)
  std::int64_t handed_over_partial = 0;  // of those, the ones stopped mid-response
  std::int64_t shards_handed_over = 0;
  std::int64_t received = 0;          // unfinished samples taken over (migration)
  ordered_json fusion;                // what a fused stage did after generating (stage.hpp's hooks); null: none
};

ordered_json to_json(const RankStats& s);
RankStats rank_stats_from_json(const json& j);

struct MigrationStats {
  double threshold = 0;               // R_t
  std::int64_t remaining = 0;         // unfinished samples over all ranks when it triggered
  std::vector<int> receivers;
  std::int64_t moved_samples = 0;     // unfinished samples that changed rank
  std::int64_t moved_partial = 0;     // of those, the ones with part of a response
  std::int64_t moved_shards = 0;
  double at_seconds = 0;              // into generation, on the first receiver
};

// The whole document; wall_seconds is the writing rank's run time.
ordered_json stage_stats(std::span<const RankStats> ranks, const std::optional<MigrationStats>& migration,
                         double wall_seconds);

}  // namespace braid::gen
