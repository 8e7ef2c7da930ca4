#include "score/stage_stats.hpp"
#include "io/stage_stats.hpp"

#include <algorithm>

namespace braid::score {
namespace {

ordered_json call(const PassTiming& t) {
  ordered_json c;
  c["seconds"] = t.seconds;
  c["tokens"] = t.tokens;
  c["sequences"] = t.sequences;
  c["tokens_per_second"] = t.seconds > 0 ? double(t.tokens) / t.seconds : 0.0;
  return c;
}

}  // namespace

ordered_json stage_stats(const BatchScorer& scorer, const StreamTotals& totals, double wall_seconds) {
  ordered_json s = io::stage_stats_head<ordered_json>("score", wall_seconds, totals.sequences, totals.tokens);
  s["response_tokens"] = totals.response_tokens;
  s["shards_scored"] = totals.shards_scored;
  s["shards_skipped"] = totals.shards_skipped;
  s["mean_reward"] = totals.sequences > 0 ? totals.reward_sum / double(totals.sequences) : 0.0;
  if (scorer.has_ref()) {
    s["mean_kl"] = totals.response_tokens > 0 ? totals.kl_sum / double(totals.response_tokens) : 0.0;
  }
  ordered_json calls = ordered_json::object();
  if (scorer.has_ref()) calls["ref_inf"] = call(scorer.ref_timing());
  if (scorer.has_critic()) calls["critic_inf"] = call(scorer.critic_timing());
  ordered_json reward = call(scorer.reward_timing());
  reward["by"] = scorer.reward_by();
  calls["reward_inf"] = reward;
  s["calls"] = calls;
  return s;
}

ordered_json merge_stage_stats(std::span<const ordered_json> ranks) {
  double wall = 0, reward = 0, kl = 0;
  std::int64_t sequences = 0, tokens = 0, response_tokens = 0, scored = 0, skipped = 0;
  bool has_kl = false;
  ordered_json calls = ordered_json::object();
  ordered_json per_rank = ordered_json::array();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const ordered_json& d = ranks[r];
    const auto n = d.at("sequences").get<std::int64_t>();
    const auto rt = d.at("response_tokens").get<std::int64_t>();
    wall = std::max(wall, d.at("wall_seconds").get<double>());
    sequences += n;
    tokens += d.at("tokens").get<std::int64_t>();
    response_tokens += rt;
    scored += d.at("shards_scored").get<std::int64_t>();
    skipped += d.at("shards_skipped").get<std::int64_t>();
    reward += d.at("mean_reward").get<double>() * double(n);
    if (d.contains("mean_kl")) {
      has_kl = true;
      kl += d["mean_kl"].get<double>() * double(rt);
    }
    double busy = 0;
    for (const auto& [name, c] : d.at("calls").items()) {
      busy += c.at("seconds").get<double>();
      if (!calls.contains(name)) {
        calls[name] = c;
        continue;
      }
      ordered_json& sum = calls[name];
      sum["seconds"] = sum["seconds"].get<double>() + c.at("seconds").get<double>();
      sum["tokens"] = sum["tokens"].get<std::int64_t>() + c.at("tokens").get<std::int64_t>();
      sum["sequences"] = sum["sequences"].get<std::int64_t>() + c.at("sequences").get<std::int64_t>();
    }
    per_rank.push_back(ordered_json{{"rank", static_cast<std::int64_t>(r)},
                                    {"wall_seconds", d.at("wall_seconds")},
                                    {"sequences", n},
                                    {"shards_scored", d.at("shards_scored")},
                                    {"shards_skipped", d.at("shards_skipped")},
                                    {"busy_seconds", busy}});
  }
  for (auto& [name, c] : calls.items()) {
    const double sec = c["seconds"].get<double>();
    c["tokens_per_second"] = sec > 0 ? double(c["tokens"].get<std::int64_t>()) / sec : 0.0;
  }
  ordered_json s = io::stage_stats_head<ordered_json>("score", wall, sequences, tokens);
  s["response_tokens"] = response_tokens;
  s["shards_scored"] = scored;
  s["shards_skipped"] = skipped;
  s["mean_reward"] = sequences > 0 ? reward / double(sequences) : 0.0;
  if (has_kl) s["mean_kl"] = response_tokens > 0 ? kl / double(response_tokens) : 0.0;
  s["calls"] = calls;
  s["ranks"] = per_rank;
  return s;
}

}  // namespace braid::score
