#include "score/model_passes.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace braid::score {
namespace {

template <typename T>
void ensure_size(backend::Buffer<T>& buf, backend::Backend& be, std::size_t n) {
  if (buf.size() < n) buf = backend::Buffer<T>(be, n);
}

// Writes per-row results of a micro-batch into a per-token array of the whole batch,
// shifted by one: token j of a sequence takes row j-1, the row that produced it.
// Prompt tokens stay 0.
void scatter_shifted(const io::SampleBatch& b, const data::MicroBatch& mb, const model::Batch& packed,
                     const std::vector<float>& rows, std::vector<float>& out) {
  for (std::size_t k = 0; k < mb.sequences.size(); ++k) {
    const std::size_t s = mb.sequences[k];
    const auto local = static_cast<std::size_t>(packed.offsets[k]);
    const std::size_t first = std::max<std::size_t>(1, static_cast<std::size_t>(b.prompt_len[s]));
    for (std::size_t j = first; j < b.length(s); ++j) out[b.begin(s) + j] = rows[local + j - 1];
  }
}

// The value head at each of the micro-batch's n rows, copied to the host.
void value_head_rows(const model::Model& m, const model::Activations& acts, std::size_t n,
                     backend::Buffer<float>& dev, std::vector<float>& host) {
  backend::Backend& be = m.backend();
  ensure_size(dev, be, n);
  m.values(acts, dev.data());
  host.resize(n);
  be.copy_to_host(host.data(), dev.data(), n * sizeof(float));
}

}  // namespace

SequenceRunner::SequenceRunner(const model::Model& m, std::int64_t micro_tokens) : m_(&m), micro_tokens_(micro_tokens) {
  if (!m.is_first_stage() || !m.is_last_stage()) {
    throw std::invalid_argument("scoring passes need a whole model, not a pipeline stage");
  }
  if (micro_tokens <= 0) throw std::invalid_argument("scoring passes need a positive micro_tokens");
}

void SequenceRunner::run(const io::SampleBatch& b, const Head& head) {
  for (const data::MicroBatch& mb : data::pack_micro_batches(b.offsets, micro_tokens_)) {
    const auto t0 = std::chrono::steady_clock::now();
    tokens_.clear();
    offsets_.assign(1, 0);
    for (std::size_t s : mb.sequences) {
      const auto seq = b.sequence(s);
      tokens_.insert(tokens_.end(), seq.begin(), seq.end());
      offsets_.push_back(static_cast<std::int64_t>(tokens_.size()));
    }
    const auto n_seq = static_cast<std::int64_t>(mb.sequences.size());
    if (!acts_ || mb.tokens > acts_tokens_ || n_seq > acts_sequences_) {
      // Sized to what the shards need (not micro_tokens sequences): the logits buffer
      // of forward_cached grows with max_sequences × vocab.
      acts_tokens_ = std::max(acts_tokens_, mb.tokens);
      acts_sequences_ = std::max(acts_sequences_, n_seq);
      acts_.reset();
      acts_ = m_->make_activations({.max_tokens = acts_tokens_, .max_sequences = acts_sequences_});
    }
    const model::Batch packed{tokens_, offsets_};
    m_->forward(packed, *acts_);
    head(mb, packed, *acts_);
    timing_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    timing_.tokens += mb.tokens;
    timing_.sequences += n_seq;
  }
}

ReferencePass::ReferencePass(const model::Model& m, std::int64_t micro_tokens)
    : runner_(m, micro_tokens), head_(m) {  // the model's vocabulary slice and tp group under tp
  if (!m.lm_head_weight()) throw std::invalid_argument("the reference pass needs a model with an LM head");
}

std::vector<float> ReferencePass::logprobs(const io::SampleBatch& b) {
  std::vector<float> out(b.token_count(), 0.0f);
  const model::Model& m = runner_.model();
  backend::Backend& be = m.backend();
  runner_.run(b, [&](const data::MicroBatch& mb, const model::Batch& packed, const model::Activations& acts) {
    const std::vector<std::int32_t> targets = rl::next_token_targets(packed);
    ensure_size(targets_dev_, be, targets.size());
    ensure_size(logprob_dev_, be, targets.size());
    be.copy_to_device(targets_dev_.data(), targets.data(), targets.size() * sizeof(std::int32_t));
    rl::token_logprobs<float>(m, acts, head_, targets_dev_.data(), logprob_dev_.data(), nullptr);
    logprob_.resize(targets.size());
    be.copy_to_host(logprob_.data(), logprob_dev_.data(), logprob_.size() * sizeof(float));
    scatter_shifted(b, mb, packed, logprob_, out);
  });
  return out;
}

ValuePass::ValuePass(const model::Model& m, std::int64_t micro_tokens) : runner_(m, micro_tokens) {
  if (!m.options().value_head) throw std::invalid_argument("the value pass needs a model with a value head");
}

std::vector<float> ValuePass::values(const io::SampleBatch& b) {
  std::vector<float> out(b.token_count(), 0.0f);
  const model::Model& m = runner_.model();
  runner_.run(b, [&](const data::MicroBatch& mb, const model::Batch& packed, const model::Activations& acts) {
    value_head_rows(m, acts, static_cast<std::size_t>(packed.offsets.back()), values_dev_, values_);
    scatter_shifted(b, mb, packed, values_, out);
  });
  return out;
}

RewardModelPass::RewardModelPass(const model::Model& m, std::int64_t micro_tokens) : runner_(m, micro_tokens) {
  if (!m.options().value_head) throw std::invalid_argument("the reward-model pass needs a model with a value head");
}

std::vector<float> RewardModelPass::rewards(const io::SampleBatch& b) {
  std::vector<float> out(b.size(), 0.0f);
  const model::Model& m = runner_.model();
  runner_.run(b, [&](const data::MicroBatch& mb, const model::Batch& packed, const model::Activations& acts) {
    // The value head over every row costs D flops a row, nothing beside the forward.
    value_head_rows(m, acts, static_cast<std::size_t>(packed.offsets.back()), values_dev_, values_);
    for (std::size_t k = 0; k < mb.sequences.size(); ++k) {
      out[mb.sequences[k]] = values_[static_cast<std::size_t>(packed.offsets[k + 1]) - 1];
    }
  });
  return out;
}

}  // namespace braid::score
