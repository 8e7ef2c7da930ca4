#include "score/stage_stats.hpp"
#include "io/stage_stats.hpp"

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

}  // namespace braid::score
