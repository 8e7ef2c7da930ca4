#include "rl/reference_logprobs.hpp"

#include "core/error.hpp"
#include "core/runs.hpp"
#include "rl/chunked_lm_head.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace braid::rl {

std::vector<float> reference_logprobs(const model::Model& m, std::span<const std::int32_t> tokens,
                                      std::span<const std::int64_t> offsets, std::int64_t max_tokens) {
  if (!m.is_first_stage() || !m.is_last_stage() || !m.lm_head_weight()) {
    throw std::invalid_argument("reference_logprobs: needs a whole model with an LM head");
  }
  const std::size_t sequences = offsets.empty() ? 0 : offsets.size() - 1;
  std::vector<std::int64_t> lengths(sequences);
  for (std::size_t i = 0; i < sequences; ++i) {
    lengths[i] = offsets[i + 1] - offsets[i];
    if (lengths[i] > max_tokens) {
      throw UsageError(fmt::format("a sequence of {} tokens does not fit a micro-batch of {} tokens (raise --micro-tokens)",
                                   lengths[i], max_tokens));
    }
  }
  // In order: micro-batch k holds the sequences after micro-batch k − 1's.
  const std::vector<std::size_t> ends = greedy_runs(lengths, max_tokens);
  std::int64_t most_tokens = 1, most_sequences = 1;
  for (std::size_t k = 0; k < ends.size(); ++k) {
    const std::size_t first = k == 0 ? 0 : ends[k - 1];
    most_tokens = std::max(most_tokens, offsets[ends[k]] - offsets[first]);
    most_sequences = std::max(most_sequences, static_cast<std::int64_t>(ends[k] - first));
  }
  backend::Backend& be = m.backend();
  auto acts = m.make_activations({.max_tokens = most_tokens, .max_sequences = most_sequences});
  ChunkedLmHead<float> head(m);   // under tp: this rank's vocabulary slice
  backend::Buffer<std::int32_t> targets_dev(be, static_cast<std::size_t>(most_tokens));
  backend::Buffer<float> logprob_dev(be, static_cast<std::size_t>(most_tokens));
  std::vector<float> rows, out(tokens.size(), 0.0f);
  std::vector<std::int64_t> mb_offsets;
  for (std::size_t k = 0; k < ends.size(); ++k) {
    const std::size_t first = k == 0 ? 0 : ends[k - 1];
    const auto base = static_cast<std::size_t>(offsets[first]);  // the micro-batch's first token in the batch
    mb_offsets.assign(offsets.begin() + static_cast<std::ptrdiff_t>(first),
                      offsets.begin() + static_cast<std::ptrdiff_t>(ends[k]) + 1);
    for (std::int64_t& o : mb_offsets) o -= offsets[first];
    const model::Batch packed{tokens.subspan(base, static_cast<std::size_t>(mb_offsets.back())), mb_offsets};
    m.forward(packed, acts);
    const std::vector<std::int32_t> targets = next_token_targets(packed);
    be.copy_to_device(targets_dev.data(), targets.data(), targets.size() * sizeof(std::int32_t));
    token_logprobs<float>(m, acts, head, targets_dev.data(), logprob_dev.data(), nullptr);
    rows.resize(packed.tokens.size());
    be.copy_to_host(rows.data(), logprob_dev.data(), rows.size() * sizeof(float));
    // Token t of a sequence gets row t − 1's logprob; its first token none.
    for (std::size_t s = 0; s + 1 < mb_offsets.size(); ++s) {
      for (auto t = static_cast<std::size_t>(mb_offsets[s]) + 1; t < static_cast<std::size_t>(mb_offsets[s + 1]); ++t) {
        out[base + t] = rows[t - 1];
      }
    }
  }
  return out;
}

}  // namespace braid::rl
