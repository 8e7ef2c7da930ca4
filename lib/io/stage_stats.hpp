// The common head of a stage tool's --stats file ("braid.stagestats", version 1):
// which stage, its wall time, the sequences and tokens it handled. Each tool adds
// its "calls" (named as braid-meshplan's plan names them) and its own figures.
#pragma once

#include <cstdint>
#include <string>

namespace braid::io {

inline constexpr const char* kStageStatsFormat = "braid.stagestats";
inline constexpr int kStageStatsVersion = 1;

template <class Json>
Json stage_stats_head(const std::string& stage, double wall_seconds, std::int64_t sequences, std::int64_t tokens) {
  Json doc;
  doc["format"] = kStageStatsFormat;
  doc["version"] = kStageStatsVersion;
  doc["stage"] = stage;
  doc["wall_seconds"] = wall_seconds;
  doc["sequences"] = sequences;
  doc["tokens"] = tokens;
  return doc;
}

}  // namespace braid::io
