#include "driver/metrics.hpp"

#include <algorithm>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "core/files.hpp"
#include "io/sample_shard.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

// A stats file, or an empty object when the stage wrote none.
json read_stats(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return json::object();
  json doc = load_json_file(path.string());
  return doc.is_object() ? doc : json::object();
}

// The training figures of braid-train's calls ("actor_train.loss", "critic_train.value_error",
// ...): every number of each call but its timing, which "seconds" already sums up.
ordered_json train_figures(const json& stats) {
  static const std::vector<std::string> timing = {"seconds", "tokens", "steps", "tokens_per_second", "sequences"};
  ordered_json out = ordered_json::object();
  if (!stats.contains("calls") || !stats["calls"].is_object()) return out;
  for (const auto& [call, figures] : stats["calls"].items()) {
    if (!figures.is_object()) continue;
    for (const auto& [key, value] : figures.items()) {
      if (value.is_number() && std::find(timing.begin(), timing.end(), key) == timing.end()) {
        out[call + "." + key] = value;
      }
    }
  }
  return out;
}

// The KL penalty coefficient braid-score used (PPO), from a scored shard's meta.config.
std::optional<double> score_kl_coef(const std::string& config) {
  const json cfg = json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object() || !cfg.contains("score") || !cfg["score"].is_object()) return std::nullopt;
  const auto it = cfg["score"].find("kl_coef");
  if (it == cfg["score"].end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// braid eval's figures of the iteration's eval.json (its numbers but the timing), or null.
std::optional<json> eval_figures(const Layout& layout, int iteration) {
  std::error_code ec;
  if (!fs::is_regular_file(layout.eval_file(iteration), ec)) return std::nullopt;
  return load_json_file(layout.eval_file(iteration).string());
}

ordered_json eval_summary(const json& ev) {
  ordered_json e = ordered_json::object();
  for (const auto& [k, v] : ev.items()) {
    if (k == "accuracy" || k.starts_with("pass@") || k.starts_with("maj@") || k == "pass_at_k" || k == "maj_at_k" ||
        k == "mean_reward" || k == "mean_response_length" || k == "prompts" || k == "samples_per_prompt" || k == "greedy") {
      e[k] = v;
    }
  }
  return e;
}

void add_eval_seconds(ordered_json& seconds, const json& ev) {
  if (ev.contains("seconds") && ev["seconds"].is_number()) seconds["eval"] = ev["seconds"];
}

}  // namespace

std::optional<ordered_json> start_metrics(const Layout& layout) {
  const auto ev = eval_figures(layout, 0);
  if (!ev) return std::nullopt;
  ordered_json m;
  m["iteration"] = 0;
  ordered_json seconds = ordered_json::object();
  add_eval_seconds(seconds, *ev);
  m["seconds"] = seconds;
  m["eval"] = eval_summary(*ev);
  return m;
}

// Whether braid-generate's stats say the rollout was fused (a rank's `fusion` figures).
static bool fused_rollout(const json& generate_stats) {
  if (!generate_stats.contains("ranks") || !generate_stats["ranks"].is_array()) return false;
  for (const auto& r : generate_stats["ranks"]) {
    if (r.is_object() && r.contains("fusion") && r["fusion"].is_object()) return true;
  }
  return false;
}

ordered_json iteration_metrics(const Layout& layout, int iteration, std::optional<double> wall_seconds) {
  std::int64_t sequences = 0, response_tokens = 0, kl_tokens = 0;
  double reward_sum = 0, kl_sum = 0;
  std::optional<double> kl_coef;
  for (const auto& path : scored_shards(layout, iteration)) {
    const io::SampleShard shard = io::read_sample_shard(path);
    if (!kl_coef) kl_coef = score_kl_coef(shard.meta.config);
    const io::SampleBatch& b = shard.batch;
    for (std::size_t i = 0; i < b.size(); ++i) {
      ++sequences;
      response_tokens += static_cast<std::int64_t>(b.response_length(i));
      if (b.reward) reward_sum += (*b.reward)[i];
      if (b.logprobs_actor && b.logprobs_ref) {
        const auto actor = b.response_of(*b.logprobs_actor, i);
        const auto ref = b.response_of(*b.logprobs_ref, i);
        for (std::size_t t = 0; t < actor.size(); ++t) kl_sum += static_cast<double>(actor[t]) - ref[t];
        kl_tokens += static_cast<std::int64_t>(actor.size());
      }
    }
  }
  ordered_json m;
  m["iteration"] = iteration;
  m["sequences"] = sequences;
  m["response_tokens"] = response_tokens;
  const double n = sequences > 0 ? static_cast<double>(sequences) : 1.0;
  m["mean_reward"] = reward_sum / n;
  m["mean_response_length"] = static_cast<double>(response_tokens) / n;
  if (kl_tokens > 0) m["kl"] = kl_sum / static_cast<double>(kl_tokens);
  if (kl_coef) m["kl_coef"] = *kl_coef;
  ordered_json seconds = ordered_json::object();
  json train_stats, generate_stats;
  for (const char* stage : {"generate", "score", "train"}) {
    const json stats = read_stats(layout.stats_file(iteration, stage));
    if (stats.contains("wall_seconds") && stats["wall_seconds"].is_number()) seconds[stage] = stats["wall_seconds"];
    if (std::string_view(stage) == "train") train_stats = stats;
    if (std::string_view(stage) == "generate") generate_stats = stats;
  }
  if (wall_seconds) seconds["iteration"] = *wall_seconds;
  const auto ev = eval_figures(layout, iteration);
  if (ev) add_eval_seconds(seconds, *ev);
  m["seconds"] = seconds;
  m["train"] = train_figures(train_stats);
  // A fused rollout scores inside braid-generate's processes: generate's wall time already
  // holds the scoring, so the two are not to be added (the report draws score inside generate).
  if (fused_rollout(generate_stats)) m["rollout"] = "fused";
  for (const char* block : {"overcommit", "data"}) {  // the prompt stream's position, overcommit's figures
    if (generate_stats.contains(block) && generate_stats[block].is_object()) {
      m[block] = ordered_json::parse(generate_stats[block].dump());
    }
  }
  // Dynamic sampling's rounds (driver/dynamic_sampling.hpp) and the groups braid-train kept.
  if (const fs::path rounds = layout.iteration_dir(iteration) / "data.json"; fs::is_regular_file(rounds)) {
    m["dynamic_sampling"] = ordered_json::parse(read_text_file(rounds.string()));
    if (train_stats.contains("groups")) m["dynamic_sampling"]["trained_groups"] = ordered_json::parse(train_stats["groups"].dump());
  }
  if (train_stats.contains("staleness") && train_stats["staleness"].is_object()) {
    m["staleness"] = ordered_json::parse(train_stats["staleness"].dump());
  }
  if (ev) m["eval"] = eval_summary(*ev);
  return m;
}

std::string summary_line(const ordered_json& m) {
  std::string line = fmt::format("iteration {}: reward {:.4f}  length {:.1f}", m.value("iteration", 0),
                                 m.value("mean_reward", 0.0), m.value("mean_response_length", 0.0));
  if (m.contains("kl")) line += fmt::format("  kl {:.4f}", m["kl"].get<double>());
  if (m.contains("kl_coef")) line += fmt::format("  kl_coef {:.4g}", m["kl_coef"].get<double>());
  if (m.contains("train")) {
    const auto& t = m["train"];
    for (const auto& [key, label] : {std::pair{"actor_train.loss", "actor loss"}, {"critic_train.loss", "critic loss"},
                                     {"actor_train.entropy", "entropy"}}) {
      if (t.contains(key)) line += fmt::format("  {} {:.4g}", label, t[key].get<double>());
    }
  }
  if (m.contains("overcommit")) {
    const auto& o = m["overcommit"];
    line += fmt::format("  deferred {} (resumed {})", o.value("deferred_samples", 0), o.value("resumed_samples", 0));
  }
  if (m.contains("staleness") && m["staleness"].value("max", 0) > 0) {
    line += fmt::format("  staleness <= {}", m["staleness"].value("max", 0));
  }
  if (m.contains("eval") && m["eval"].contains("accuracy")) {
    line += fmt::format("  held-out accuracy {:.4f}", m["eval"]["accuracy"].get<double>());
  }
  if (m.contains("seconds")) {
    line += "  |";
    for (const auto& [stage, s] : m["seconds"].items()) line += fmt::format(" {} {:.1f}s", stage, s.get<double>());
  }
  return line;
}

}  // namespace braid::driver
