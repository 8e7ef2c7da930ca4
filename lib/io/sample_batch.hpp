// A batch of RL samples in memory, laid out the way a sample shard stores it:
// all sequences' tokens back to back in `tokens`, sequence i at
// [offsets[i], offsets[i+1]), its first prompt_len[i] tokens the prompt and the
// rest the response. Per-token arrays run parallel to `tokens`; entry t belongs
// to token t (at prompt positions they are unused and written as 0).
//
//   SampleBatch b;
//   b.add(prompt_and_response_tokens, prompt_length, id);
//   b.logprobs_actor = std::vector<float>(b.token_count());   // fill per token
//   for (std::size_t i = 0; i < b.size(); ++i) use(b.response(i));
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace braid::io {

// Where a sample's prompt came from: its line in the prompt file and that line's
// extra fields (every key but the prompt itself: "answer", "id", ...) as the text of
// a JSON object, for rewards that check a response against them (math answers, an
// external scorer). braid-generate fills it; shards written before it have none.
struct PromptOrigin {
  std::int64_t line = 0;        // 1-based line of the prompt file (0: not known)
  std::string extra = "{}";     // a JSON object's text

  bool operator==(const PromptOrigin&) const = default;
};

struct SampleBatch {
  std::vector<std::int32_t> tokens;          // all sequences, flat
  std::vector<std::int64_t> offsets{0};      // size() + 1 entries, offsets[0] == 0
  std::vector<std::int32_t> prompt_len;      // per sequence
  std::vector<std::int64_t> sample_id;       // per sequence: which prompt/sample it is
  std::optional<std::vector<float>> reward;  // per sequence, once scored
  std::optional<std::vector<PromptOrigin>> origin;  // per sequence, from braid-generate

  // Per-token arrays (each absent until a stage computes it):
  std::optional<std::vector<float>> logprobs_actor;  // log π(token t | tokens before t), generating policy
  std::optional<std::vector<float>> logprobs_ref;    // the same under the reference model
  std::optional<std::vector<float>> values;          // critic's value at the position that produced token t
  std::optional<std::vector<float>> advantages;      // GAE advantage of token t
  std::optional<std::vector<float>> returns;         // value target of token t
  // Which response tokens training learns: token t where loss_mask[t] is not 0 (a
  // conversation's assistant turns, not the user and tool turns between them). Absent:
  // every response token.
  std::optional<std::vector<float>> loss_mask;
  // The actor's training step that sampled token t (0 on the prompt). Absent in shards
  // from before it was kept: every token then comes from the shard's meta.policy_step.
  // A sample deferred across iterations (overcommit) holds tokens of several steps.
  std::optional<std::vector<std::int64_t>> policy_step;

  std::size_t size() const noexcept { return prompt_len.size(); }
  std::size_t token_count() const noexcept { return tokens.size(); }

  // Appends one sequence; returns its index. Per-token arrays that are present
  // grow by the sequence's length (zeros), the reward (if present) by a 0, the
  // origin (if present) by an unknown line with no extra fields.
  std::size_t add(std::span<const std::int32_t> sequence, std::int32_t prompt_length, std::int64_t id);

  // Token index range of sequence i, and of its response part.
  std::size_t begin(std::size_t i) const { return static_cast<std::size_t>(offsets[i]); }
  std::size_t end(std::size_t i) const { return static_cast<std::size_t>(offsets[i + 1]); }
  std::size_t response_begin(std::size_t i) const { return begin(i) + static_cast<std::size_t>(prompt_len[i]); }
  std::size_t length(std::size_t i) const { return end(i) - begin(i); }
  std::size_t response_length(std::size_t i) const { return end(i) - response_begin(i); }

  std::span<const std::int32_t> sequence(std::size_t i) const;
  std::span<const std::int32_t> prompt(std::size_t i) const;
  std::span<const std::int32_t> response(std::size_t i) const;
  // The response part of a per-token array (one of the members above).
  std::span<const float> response_of(const std::vector<float>& per_token, std::size_t i) const;
  // Whether token t is learnt: a response token not masked out by loss_mask.
  bool learnt(std::size_t i, std::size_t t) const {
    return t >= response_begin(i) && t < end(i) && (!loss_mask || (*loss_mask)[t] != 0.0f);
  }

  // Every broken invariant, each naming the dataset ("/offsets: ..."); empty when valid.
  std::vector<std::string> problems() const;
};

// The per-token arrays by their dataset path in a shard, for code that treats them alike.
struct TokenArrayField {
  const char* path;  // "logprobs/actor"
  std::optional<std::vector<float>> SampleBatch::*member;
};
const std::array<TokenArrayField, 6>& token_array_fields();

// The sizes a shard's datasets have, enough to check the layout without reading
// the per-token data. problems() of a batch and the shard reader both use it.
struct SampleLayout {
  std::int64_t tokens = 0;
  std::vector<std::int64_t> offsets;
  std::vector<std::int32_t> prompt_len;
  std::int64_t sample_ids = 0;
  std::optional<std::int64_t> rewards;
  std::vector<std::pair<std::string, std::int64_t>> token_arrays;  // path, length
  std::optional<std::int64_t> policy_steps;  // /policy_step's length
  // The prompt origins (all three present or none): /prompt/line's length,
  // /prompt/extra_offsets in full, /prompt/extra's length in bytes.
  std::optional<std::int64_t> origin_lines;
  std::optional<std::vector<std::int64_t>> extra_offsets;
  std::optional<std::int64_t> extra_bytes;
};
std::vector<std::string> layout_problems(const SampleLayout& layout);

// The first origin whose extra fields are not a JSON object's text, or whose line is
// negative, as "/prompt/extra: sequence 3 ..."; nullopt when all are good.
std::optional<std::string> extra_problem(std::span<const PromptOrigin> origins);

}  // namespace braid::io
