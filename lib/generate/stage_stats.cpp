#include "generate/stage_stats.hpp"
#include "io/stage_stats.hpp"

#include <algorithm>

namespace braid::gen {

ordered_json to_json(const RankStats& s) {
  ordered_json j{{"rank", s.rank},
              {"role", s.role},
              {"sequences", s.sequences},
              {"tokens", s.tokens},
              {"response_tokens", s.response_tokens},
              {"prefill_tokens", s.prefill_tokens},
              {"steps", s.steps},
              {"prefill_seconds", s.prefill_seconds},
              {"decode_seconds", s.decode_seconds},
              {"generate_seconds", s.generate_seconds},
              {"shards_written", s.shards_written},
              {"shards_skipped", s.shards_skipped},
              {"handed_over", s.handed_over},
              {"handed_over_partial", s.handed_over_partial},
              {"shards_handed_over", s.shards_handed_over},
              {"received", s.received}};
  if (!s.fusion.is_null()) j["fusion"] = s.fusion;
  return j;
}

RankStats rank_stats_from_json(const json& j) {
  RankStats s;
  s.rank = j.at("rank").get<int>();
  s.role = j.at("role").get<std::string>();
  s.sequences = j.at("sequences").get<std::int64_t>();
  s.tokens = j.at("tokens").get<std::int64_t>();
  s.response_tokens = j.at("response_tokens").get<std::int64_t>();
  s.prefill_tokens = j.at("prefill_tokens").get<std::int64_t>();
  s.steps = j.at("steps").get<std::int64_t>();
  s.prefill_seconds = j.at("prefill_seconds").get<double>();
  s.decode_seconds = j.at("decode_seconds").get<double>();
  s.generate_seconds = j.at("generate_seconds").get<double>();
  s.shards_written = j.at("shards_written").get<std::int64_t>();
  s.shards_skipped = j.at("shards_skipped").get<std::int64_t>();
  s.handed_over = j.at("handed_over").get<std::int64_t>();
  s.handed_over_partial = j.at("handed_over_partial").get<std::int64_t>();
  s.shards_handed_over = j.at("shards_handed_over").get<std::int64_t>();
  s.received = j.at("received").get<std::int64_t>();
  if (j.contains("fusion")) s.fusion = ordered_json::parse(j["fusion"].dump());
  return s;
}

ordered_json stage_stats(std::span<const RankStats> ranks, const std::optional<MigrationStats>& migration,
                         double wall_seconds) {
  RankStats sum;
  double generate_wall = 0;
  for (const RankStats& r : ranks) {
    sum.sequences += r.sequences;
    sum.tokens += r.tokens;
    sum.response_tokens += r.response_tokens;
    sum.prefill_tokens += r.prefill_tokens;
    sum.steps += r.steps;
    sum.prefill_seconds += r.prefill_seconds;
    sum.decode_seconds += r.decode_seconds;
    sum.shards_written += r.shards_written;
    sum.shards_skipped += r.shards_skipped;
    generate_wall = std::max(generate_wall, r.generate_seconds);
  }
  ordered_json doc = io::stage_stats_head<ordered_json>("generate", wall_seconds, sum.sequences, sum.tokens);
  doc["shards_written"] = sum.shards_written;
  doc["shards_skipped"] = sum.shards_skipped;
  // seconds: the call's wall time (the slowest rank), what a plan predicts; the
  // prefill/decode split is forward time summed over ranks.
  doc["calls"]["actor_gen"] = ordered_json{
      {"seconds", generate_wall},
      {"prefill_seconds", sum.prefill_seconds},
      {"decode_seconds", sum.decode_seconds},
      {"prompt_tokens", sum.prefill_tokens},
      {"response_tokens", sum.response_tokens},
      {"steps", sum.steps},
      {"ranks", static_cast<std::int64_t>(ranks.size())},
      {"response_tokens_per_second", generate_wall > 0 ? static_cast<double>(sum.response_tokens) / generate_wall : 0.0}};
  if (migration) {
    doc["migration"] = ordered_json{{"threshold", migration->threshold},
                                    {"remaining", migration->remaining},
                                    {"receivers", migration->receivers},
                                    {"moved_samples", migration->moved_samples},
                                    {"moved_partial", migration->moved_partial},
                                    {"moved_shards", migration->moved_shards},
                                    {"at_seconds", migration->at_seconds}};
  } else {
    doc["migration"] = nullptr;
  }
  ordered_json per_rank = ordered_json::array();
  for (const RankStats& r : ranks) per_rank.push_back(to_json(r));
  doc["ranks"] = per_rank;
  return doc;
}

}  // namespace braid::gen
