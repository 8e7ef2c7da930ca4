#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/token_display.hpp"
#include "io/inspect_kinds.hpp"
#include "io/sample_shard.hpp"
#include "tokenizer/tokenizer.hpp"

namespace braid::io::detail {

namespace {

// How a sample shard's tokens are shown: by the tokenizer asked for, else by the one
// the shard records (meta.config "tokenizer", braid-generate's), else as bytes.
class ShardDecoder {
 public:
  ShardDecoder(const std::string& asked, const std::string& config, const std::string& shard) {
    if (!asked.empty()) {
      use(asked, "--tokenizer");
      return;
    }
    const auto c = ordered_json::parse(config, nullptr, false);
    const auto it = c.is_object() ? c.find("tokenizer") : c.end();
    if (c.is_object() && it != c.end() && it->is_string() && !it->get<std::string>().empty()) {
      const std::string recorded = it->get<std::string>();
      if (recorded == "byte") {
        description_ = "byte (recorded in meta.config)";
      } else if (!std::filesystem::exists(recorded)) {
        description_ = fmt::format("byte display: the recorded tokenizer {} is not there (give --tokenizer)", recorded);
      } else {
        try {
          use(recorded, "recorded in meta.config");
        } catch (const InputError& e) {
          description_ = fmt::format("byte display: the recorded tokenizer could not be read ({})", e.what());
        }
      }
    } else {
      description_ = fmt::format("byte display: {} records no tokenizer (give --tokenizer)", shard);
    }
  }

  const std::string& description() const { return description_; }

  // The prompt and the response shown: a tokenizer decodes the two as one sequence and
  // the response is what that adds to the prompt's text (decoded alone, a SentencePiece
  // response would lose its leading space).
  std::pair<std::string, std::string> show(std::span<const std::int32_t> prompt,
                                           std::span<const std::int32_t> response) const {
    if (!tok_) return {display_tokens(prompt), display_tokens(response)};
    const std::string p = text(prompt);
    std::vector<std::int32_t> all(prompt.begin(), prompt.end());
    all.insert(all.end(), response.begin(), response.end());
    const std::string whole = text(all);
    if (whole.starts_with(p)) return {display_text(p), display_text(std::string_view(whole).substr(p.size()))};
    return {display_text(p), display_text(text(response))};
  }

 private:
  // Ids past the tokenizer (a model's vocabulary may be padded beyond it) show as <|id:N|>.
  std::string text(std::span<const std::int32_t> ids) const {
    std::string out;
    std::size_t run = 0;
    for (std::size_t i = 0; i <= ids.size(); ++i) {
      if (i < ids.size() && ids[i] >= 0 && ids[i] < tok_->vocab_size()) continue;
      if (i > run) out += tok_->decode(ids.subspan(run, i - run), /*skip_special=*/false);
      if (i < ids.size()) out += fmt::format("<|id:{}|>", ids[i]);
      run = i + 1;
    }
    return out;
  }

  void use(const std::string& spec, const char* how) {
    tok_ = tok::load_tokenizer(spec);
    description_ = fmt::format("{} ({}, {})", spec, tok_->describe(), how);
  }

  std::unique_ptr<tok::Tokenizer> tok_;
  std::string description_;
};

}  // namespace

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
  s["made_from"] = json_or_text(shard.meta.made_from);
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

  const ShardDecoder decoder(options.tokenizer, shard.meta.config, path);
  s["decoded_with"] = decoder.description();
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
    auto [prompt_text, response_text] = decoder.show(b.prompt(i), b.response(i));
    one["prompt"] = std::move(prompt_text);
    one["response"] = std::move(response_text);
    shown.push_back(std::move(one));
  }
  s["first_samples"] = shown;
  return s;
}

}  // namespace braid::io::detail
