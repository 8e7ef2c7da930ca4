#include "train/sft.hpp"

#include "core/error.hpp"
#include "rl/sft_loss.hpp"

#include <fmt/format.h>

namespace braid::train {

SftTrainer::SftTrainer(model::Model& m, SftOptions opt)
    : m_(&m),
      opt_(opt),
      adamw_(m.backend(), m.tensors(), opt.adamw),
      head_(m.backend(), m.config().vocab_size, m.config().hidden_size, opt.head_chunk_rows),
      acts_(m.make_activations({.max_tokens = opt.max_tokens, .max_sequences = opt.max_sequences, .training = true})),
      logprob_dev_(m.backend(), static_cast<std::size_t>(opt.max_tokens)),
      d_logprob_dev_(m.backend(), static_cast<std::size_t>(opt.max_tokens)),
      targets_dev_(m.backend(), static_cast<std::size_t>(opt.max_tokens)) {
  if (!m.is_first_stage() || !m.is_last_stage() || !m.options().lm_head) {
    throw UsageError("SFT needs a whole model with an LM head (pipeline stages train through braid-train)");
  }
}

double SftTrainer::forward_loss(std::span<const SftExample> batch, double scale, std::int64_t* counted) {
  tokens_.clear();
  offsets_.assign(1, 0);
  mask_.clear();
  for (const SftExample& ex : batch) {
    if (!ex.learn.empty() && ex.learn.size() != ex.tokens.size()) {
      throw std::invalid_argument("SftExample: learn and tokens differ in length");
    }
    tokens_.insert(tokens_.end(), ex.tokens.begin(), ex.tokens.end());
    offsets_.push_back(static_cast<std::int64_t>(tokens_.size()));
    // Row r predicts token r + 1: it counts when that token is to be learnt.
    for (std::size_t i = 0; i < ex.tokens.size(); ++i) {
      mask_.push_back(i + 1 < ex.tokens.size() && (ex.learn.empty() || ex.learn[i + 1] != 0) ? 1 : 0);
    }
  }
  const auto n = static_cast<std::int64_t>(tokens_.size());
  if (n > opt_.max_tokens || static_cast<std::int64_t>(batch.size()) > opt_.max_sequences) {
    throw std::invalid_argument(fmt::format("SFT micro-batch of {} tokens / {} sequences exceeds {} / {}", n,
                                            batch.size(), opt_.max_tokens, opt_.max_sequences));
  }
  const model::Batch b{tokens_, offsets_};
  targets_ = rl::next_token_targets(b);
  m_->forward(b, acts_);

  backend::Backend& be = m_->backend();
  be.copy_to_device(targets_dev_.data(), targets_.data(), targets_.size() * sizeof(std::int32_t));
  rl::token_logprobs<float>(*m_, acts_, head_, targets_dev_.data(), logprob_dev_.data(), nullptr);
  logprob_.resize(static_cast<std::size_t>(n));
  d_logprob_.resize(static_cast<std::size_t>(n));
  be.copy_to_host(logprob_.data(), logprob_dev_.data(), logprob_.size() * sizeof(float));
  if (counted) {
    for (std::size_t i = 0; i < mask_.size(); ++i) *counted += targets_[i] >= 0 && mask_[i];
  }
  return rl::sft_loss(logprob_, targets_, mask_, d_logprob_, scale);
}

SftStepResult SftTrainer::step(std::span<const std::vector<SftExample>> micro_batches) {
  if (micro_batches.empty()) throw std::invalid_argument("SFT step without micro-batches");
  SftStepResult r;
  m_->zero_grad();
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  backend::Backend& be = m_->backend();
  for (const auto& mb : micro_batches) {
    r.loss += scale * forward_loss(mb, scale, &r.target_tokens);
    be.copy_to_device(d_logprob_dev_.data(), d_logprob_.data(), d_logprob_.size() * sizeof(float));
    rl::token_logprobs_backward<float>(*m_, acts_, head_, targets_dev_.data(), d_logprob_dev_.data(), nullptr);
    m_->backward(acts_);
  }
  r.lr = opt_.lr.at(adamw_.steps_taken());
  r.grad_norm = adamw_.step(r.lr, 1.0);  // the 1/k of accumulation is already in d_logprob
  return r;
}

double SftTrainer::evaluate(std::span<const SftExample> batch) { return forward_loss(batch, 1.0, nullptr); }

}  // namespace braid::train
