#include "train/reference_logprobs.hpp"

#include "rl/chunked_lm_head.hpp"
#include "data/micro_batches.hpp"

#include <numeric>
#include <stdexcept>

namespace braid::train {

std::vector<float> reference_logprobs(const model::Model& m, const io::SampleBatch& b, std::int64_t max_tokens) {
  if (!m.is_first_stage() || !m.is_last_stage() || !m.lm_head_weight()) {
    throw std::invalid_argument("reference_logprobs: needs a whole model with an LM head");
  }
  std::vector<std::size_t> order(b.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // In order: micro-batch k holds the sequences after micro-batch k − 1's.
  const std::vector<io::SampleBatch> mbs = data::micro_batches(b, order, {.max_tokens = max_tokens});
  std::int64_t most_tokens = 1, most_sequences = 1;
  for (const io::SampleBatch& mb : mbs) {
    most_tokens = std::max(most_tokens, static_cast<std::int64_t>(mb.token_count()));
    most_sequences = std::max(most_sequences, static_cast<std::int64_t>(mb.size()));
  }
  backend::Backend& be = m.backend();
  auto acts = m.make_activations({.max_tokens = most_tokens, .max_sequences = most_sequences});
  rl::ChunkedLmHead<float> head(m);   // under tp: this rank's vocabulary slice
  backend::Buffer<std::int32_t> targets_dev(be, static_cast<std::size_t>(most_tokens));
  backend::Buffer<float> logprob_dev(be, static_cast<std::size_t>(most_tokens));
  std::vector<float> rows, out(b.token_count(), 0.0f);
  std::size_t base = 0;  // the first token of mb in b
  for (const io::SampleBatch& mb : mbs) {
    const model::Batch packed{mb.tokens, mb.offsets};
    m.forward(packed, acts);
    const std::vector<std::int32_t> targets = rl::next_token_targets(packed);
    be.copy_to_device(targets_dev.data(), targets.data(), targets.size() * sizeof(std::int32_t));
    rl::token_logprobs<float>(m, acts, head, targets_dev.data(), logprob_dev.data(), nullptr);
    rows.resize(mb.token_count());
    be.copy_to_host(rows.data(), logprob_dev.data(), rows.size() * sizeof(float));
    for (std::size_t i = 0; i < mb.size(); ++i) {
      for (std::size_t t = mb.begin(i) + 1; t < mb.end(i); ++t) out[base + t] = rows[t - 1];
    }
    base += mb.token_count();
  }
  return out;
}

}  // namespace braid::train
