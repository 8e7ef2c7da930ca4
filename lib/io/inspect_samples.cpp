#include <algorithm>
#include <cmath>

#include "io/token_display.hpp"
#include "io/inspect_kinds.hpp"
#include "io/sample_shard.hpp"

namespace braid::io::detail {

ordered_json distribution(std::vector<double> values) {
  ordered_json d;
  d["count"] = values.size();
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  auto quantile = [&](double q) {
    return values[static_cast<std::size_t>(std::floor(q * static_cast<double>(values.size() - 1)))];
  };
  d["mean"] = mean;
  d["std"] = std::sqrt(ss / static_cast<double>(values.size()));
  d["min"] = values.front();
  d["p50"] = quantile(0.5);
  d["p90"] = quantile(0.9);
  d["max"] = values.back();
  return d;
}

ordered_json json_or_text(const std::string& text) {
  if (text.empty()) return nullptr;
  auto parsed = ordered_json::parse(text, nullptr, false);
  return parsed.is_discarded() ? ordered_json(text) : parsed;
}

ordered_json summarize_samples(const std::string& path, const InspectOptions& options) {
  const SampleShard shard = read_sample_shard(path);
  const SampleBatch& b = shard.batch;
  ordered_json s;
  s["file"] = path;
  s["kind"] = "samples";
  s["format"] = kSamplesFormat;
  s["version"] = kSamplesVersion;
  s["policy_step"] = shard.meta.policy_step;
  s["created_by"] = shard.meta.created_by;
  s["config"] = json_or_text(shard.meta.config);
  s["sequences"] = b.size();
  s["tokens"] = b.token_count();

  std::vector<double> prompt, response;
  for (std::size_t i = 0; i < b.size(); ++i) {
    prompt.push_back(static_cast<double>(b.prompt_len[i]));
    response.push_back(static_cast<double>(b.response_length(i)));
  }
  s["prompt_length"] = distribution(prompt);
  s["response_length"] = distribution(response);
  if (b.reward) s["reward"] = distribution(std::vector<double>(b.reward->begin(), b.reward->end()));

  // Per-token arrays over response tokens only: prompt positions hold no values.
  ordered_json arrays = ordered_json::object();
  for (const auto& field : token_array_fields()) {
    const auto& arr = b.*field.member;
    if (!arr) continue;
    std::vector<double> v;
    for (std::size_t i = 0; i < b.size(); ++i) {
      for (float x : b.response_of(*arr, i)) v.push_back(x);
    }
    arrays[field.path] = distribution(std::move(v));
  }
  s["token_arrays"] = arrays;
  s["other_datasets"] = probe_sample_shard(path).other_datasets;  // kept by no braid stage

  ordered_json shown = ordered_json::array();
  for (std::size_t i = 0; i < std::min(options.samples_shown, b.size()); ++i) {
    ordered_json one;
    one["index"] = i;
    one["sample_id"] = b.sample_id[i];
    one["prompt_len"] = b.prompt_len[i];
    one["response_len"] = b.response_length(i);
    if (b.reward) one["reward"] = (*b.reward)[i];
    if (b.origin) {
      one["prompt_line"] = (*b.origin)[i].line;
      one["extra"] = ordered_json::parse((*b.origin)[i].extra);
    }
    one["prompt"] = display_tokens(b.prompt(i));
    one["response"] = display_tokens(b.response(i));
    shown.push_back(std::move(one));
  }
  s["first_samples"] = shown;
  return s;
}

}  // namespace braid::io::detail
