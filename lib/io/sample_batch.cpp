#include "io/sample_batch.hpp"

#include "core/json.hpp"

#include <fmt/format.h>

namespace braid::io {

std::optional<std::string> extra_problem(std::span<const PromptOrigin> origins) {
  for (std::size_t i = 0; i < origins.size(); ++i) {
    const json v = parse_json_or_discarded(origins[i].extra);
    if (!v.is_object()) {
      return fmt::format("/prompt/extra: sequence {} holds {}, expected the text of a JSON object", i,
                         v.is_discarded() ? "text that is not JSON" : "JSON that is not an object");
    }
    if (origins[i].line < 0) return fmt::format("/prompt/line: sequence {} has line {}, expected >= 0", i, origins[i].line);
  }
  return std::nullopt;
}

const std::array<TokenArrayField, 6>& token_array_fields() {
  static const std::array<TokenArrayField, 6> fields{{
      {"logprobs/actor", &SampleBatch::logprobs_actor},
      {"logprobs/ref", &SampleBatch::logprobs_ref},
      {"values", &SampleBatch::values},
      {"advantages", &SampleBatch::advantages},
      {"returns", &SampleBatch::returns},
      {"loss_mask", &SampleBatch::loss_mask},
  }};
  return fields;
}

std::size_t SampleBatch::add(std::span<const std::int32_t> sequence, std::int32_t prompt_length, std::int64_t id) {
  tokens.insert(tokens.end(), sequence.begin(), sequence.end());
  offsets.push_back(static_cast<std::int64_t>(tokens.size()));
  prompt_len.push_back(prompt_length);
  sample_id.push_back(id);
  if (reward) reward->push_back(0.0f);
  if (origin) origin->emplace_back();
  for (const auto& f : token_array_fields()) {
    auto& arr = this->*f.member;
    if (arr) arr->resize(arr->size() + sequence.size(), 0.0f);
  }
  if (policy_step) policy_step->resize(policy_step->size() + sequence.size(), 0);
  return size() - 1;
}

std::span<const std::int32_t> SampleBatch::sequence(std::size_t i) const {
  return std::span<const std::int32_t>(tokens).subspan(begin(i), length(i));
}

std::span<const std::int32_t> SampleBatch::prompt(std::size_t i) const {
  return std::span<const std::int32_t>(tokens).subspan(begin(i), static_cast<std::size_t>(prompt_len[i]));
}

std::span<const std::int32_t> SampleBatch::response(std::size_t i) const {
  return std::span<const std::int32_t>(tokens).subspan(response_begin(i), response_length(i));
}

std::span<const float> SampleBatch::response_of(const std::vector<float>& per_token, std::size_t i) const {
  return std::span<const float>(per_token).subspan(response_begin(i), response_length(i));
}

std::vector<std::string> layout_problems(const SampleLayout& l) {
  std::vector<std::string> out;
  if (l.offsets.empty()) {
    out.push_back("/offsets: is empty, expected n+1 entries starting with 0");
    return out;
  }
  const std::size_t n = l.offsets.size() - 1;
  if (l.offsets.front() != 0) out.push_back(fmt::format("/offsets: offsets[0] is {}, expected 0", l.offsets.front()));
  if (l.offsets.back() != l.tokens) {
    out.push_back(fmt::format("/offsets: the last offset is {}, expected {} (the length of /tokens)", l.offsets.back(),
                              l.tokens));
  }
  bool monotone = true;
  for (std::size_t i = 0; i < n && monotone; ++i) {
    if (l.offsets[i + 1] < l.offsets[i]) {
      out.push_back(fmt::format("/offsets: decreases at sequence {} ({} then {})", i, l.offsets[i], l.offsets[i + 1]));
      monotone = false;
    }
  }
  if (l.prompt_len.size() != n) {
    out.push_back(fmt::format("/prompt_len: has {} entries, expected {} (one per sequence)", l.prompt_len.size(), n));
  } else if (monotone) {  // sequence lengths mean nothing while the offsets decrease
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t len = l.offsets[i + 1] - l.offsets[i];
      if (l.prompt_len[i] < 1 || l.prompt_len[i] > len) {
        // A response token's logprob is conditioned on what comes before it: at least one prompt token.
        out.push_back(fmt::format("/prompt_len: sequence {} has prompt_len {} but {} tokens (a prompt holds at least "
                                  "one token)",
                                  i, l.prompt_len[i], len));
        break;
      }
    }
  }
  if (l.sample_ids != static_cast<std::int64_t>(n)) {
    out.push_back(fmt::format("/sample_id: has {} entries, expected {} (one per sequence)", l.sample_ids, n));
  }
  if (l.rewards && *l.rewards != static_cast<std::int64_t>(n)) {
    out.push_back(fmt::format("/reward: has {} entries, expected {} (one per sequence)", *l.rewards, n));
  }
  for (const auto& [path, len] : l.token_arrays) {
    if (len != l.tokens) {
      out.push_back(fmt::format("/{}: has {} entries, expected {} (the length of /tokens)", path, len, l.tokens));
    }
  }
  if (l.policy_steps && *l.policy_steps != l.tokens) {
    out.push_back(fmt::format("/policy_step: has {} entries, expected {} (the length of /tokens)", *l.policy_steps,
                              l.tokens));
  }
  const int origin_parts = int(l.origin_lines.has_value()) + int(l.extra_offsets.has_value()) + int(l.extra_bytes.has_value());
  if (origin_parts != 0 && origin_parts != 3) {
    out.push_back("/prompt: needs all of /prompt/line, /prompt/extra and /prompt/extra_offsets, or none");
    return out;
  }
  if (origin_parts == 0) return out;
  if (*l.origin_lines != static_cast<std::int64_t>(n)) {
    out.push_back(fmt::format("/prompt/line: has {} entries, expected {} (one per sequence)", *l.origin_lines, n));
  }
  const auto& eo = *l.extra_offsets;
  if (eo.size() != n + 1) {
    out.push_back(fmt::format("/prompt/extra_offsets: has {} entries, expected {} (one per sequence, plus one)",
                              eo.size(), n + 1));
    return out;
  }
  if (eo.front() != 0) out.push_back(fmt::format("/prompt/extra_offsets: entry 0 is {}, expected 0", eo.front()));
  if (eo.back() != *l.extra_bytes) {
    out.push_back(fmt::format("/prompt/extra_offsets: the last offset is {}, expected {} (the length of /prompt/extra)",
                              eo.back(), *l.extra_bytes));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (eo[i + 1] < eo[i]) {
      out.push_back(fmt::format("/prompt/extra_offsets: decreases at sequence {} ({} then {})", i, eo[i], eo[i + 1]));
      break;
    }
  }
  return out;
}

std::vector<std::string> SampleBatch::problems() const {
  SampleLayout l;
  l.tokens = static_cast<std::int64_t>(tokens.size());
  l.offsets = offsets;
  l.prompt_len = prompt_len;
  l.sample_ids = static_cast<std::int64_t>(sample_id.size());
  if (reward) l.rewards = static_cast<std::int64_t>(reward->size());
  for (const auto& f : token_array_fields()) {
    const auto& arr = this->*f.member;
    if (arr) l.token_arrays.emplace_back(f.path, static_cast<std::int64_t>(arr->size()));
  }
  if (policy_step) l.policy_steps = static_cast<std::int64_t>(policy_step->size());
  if (origin) {
    l.origin_lines = static_cast<std::int64_t>(origin->size());
    std::vector<std::int64_t> eo{0};
    for (const auto& o : *origin) eo.push_back(eo.back() + static_cast<std::int64_t>(o.extra.size()));
    l.extra_bytes = eo.back();
    l.extra_offsets = std::move(eo);
  }
  auto out = layout_problems(l);
  if (origin) {
    if (auto bad = extra_problem(*origin)) out.push_back(*bad);
  }
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0) {
      out.push_back(fmt::format("/tokens: token {} is {}, expected a token id >= 0", t, tokens[t]));
      break;
    }
  }
  return out;
}

}  // namespace braid::io
