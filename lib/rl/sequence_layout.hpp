// Where prompts and responses lie in flat per-token arrays: sequences back to back,
// sequence i at [offsets[i], offsets[i+1]), its first prompt_len[i] tokens the prompt
// and the rest the response. It is the layout of a sample shard (docs/formats.md), held
// as spans so that rl's math needs no knowledge of shards: a caller holding an
// io::SampleBatch passes {b.offsets, b.prompt_len}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace braid::rl {

struct SequenceLayout {
  std::span<const std::int64_t> offsets;     // size() + 1 entries, offsets[0] == 0
  std::span<const std::int32_t> prompt_len;  // one per sequence

  std::size_t size() const { return prompt_len.size(); }
  std::size_t token_count() const { return offsets.empty() ? 0 : static_cast<std::size_t>(offsets.back()); }
  std::size_t begin(std::size_t i) const { return static_cast<std::size_t>(offsets[i]); }
  std::size_t end(std::size_t i) const { return static_cast<std::size_t>(offsets[i + 1]); }
  std::size_t response_begin(std::size_t i) const { return begin(i) + static_cast<std::size_t>(prompt_len[i]); }
  std::size_t response_length(std::size_t i) const { return end(i) - response_begin(i); }

  // std::invalid_argument, naming `what`, unless offsets has size() + 1 entries rising
  // from 0 with every prompt inside its sequence.
  void check(const char* what) const;
  // std::invalid_argument, naming `what` and `array`, unless per_token has token_count() entries.
  void check_per_token(const char* what, const char* array, std::size_t per_token) const;
};

}  // namespace braid::rl
