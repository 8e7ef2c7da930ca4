#include "rl/chunked_lm_head.hpp"

#include <algorithm>
#include <stdexcept>

namespace braid::rl {

template <typename T>
ChunkedLmHead<T>::ChunkedLmHead(backend::Backend& be, std::int64_t vocab, std::int64_t hidden,
                                std::int64_t chunk_rows)
    : be_(&be), vocab_(vocab), hidden_(hidden), chunk_(chunk_rows) {
  if (vocab <= 0 || hidden <= 0 || chunk_rows <= 0) throw std::invalid_argument("ChunkedLmHead: sizes must be positive");
  logits_ = backend::Buffer<T>(be, std::size_t(chunk_ * vocab_));
  lse_ = backend::Buffer<T>(be, std::size_t(chunk_));
  logprob_ = backend::Buffer<T>(be, std::size_t(chunk_));
  entropy_ = backend::Buffer<T>(be, std::size_t(chunk_));
}

template <typename T>
void ChunkedLmHead<T>::forward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
                               T* logprob, T* entropy) {
  backend::Ops<T>& ops = be_->ops<T>();
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_) {
    const std::int64_t n = std::min(chunk_, rows - r0);
    ops.gemm(false, true, n, vocab_, hidden_, T(1), hidden + r0 * hidden_, hidden_, weight, hidden_, T(0),
             logits_.data(), vocab_);
    ops.softmax_stats(logits_.data(), n, vocab_, targets ? targets + r0 : nullptr, lse_.data(),
                      logprob ? logprob + r0 : nullptr, entropy ? entropy + r0 : nullptr);
  }
}

template <typename T>
void ChunkedLmHead<T>::backward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
                                const T* d_logprob, const T* d_entropy, T* d_hidden, T* d_weight) {
  backend::Ops<T>& ops = be_->ops<T>();
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_) {
    const std::int64_t n = std::min(chunk_, rows - r0);
    const T* h = hidden + r0 * hidden_;
    const std::int32_t* t = targets ? targets + r0 : nullptr;
    ops.gemm(false, true, n, vocab_, hidden_, T(1), h, hidden_, weight, hidden_, T(0), logits_.data(), vocab_);
    ops.softmax_stats(logits_.data(), n, vocab_, t, lse_.data(), nullptr, entropy_.data());
    ops.softmax_stats_backward(logits_.data(), n, vocab_, t, lse_.data(), entropy_.data(),
                               d_logprob ? d_logprob + r0 : nullptr, d_entropy ? d_entropy + r0 : nullptr);
    ops.gemm(false, false, n, hidden_, vocab_, T(1), logits_.data(), vocab_, weight, hidden_, T(1),
             d_hidden + r0 * hidden_, hidden_);
    ops.gemm(true, false, vocab_, hidden_, n, T(1), logits_.data(), vocab_, h, hidden_, T(1), d_weight, hidden_);
  }
}

std::vector<std::int32_t> next_token_targets(const model::Batch& batch) {
  std::vector<std::int32_t> t(batch.tokens.size(), -1);
  for (std::size_t s = 0; s + 1 < batch.offsets.size(); ++s) {
    for (std::int64_t r = batch.offsets[s]; r + 1 < batch.offsets[s + 1]; ++r)
      t[std::size_t(r)] = batch.tokens[std::size_t(r + 1)];
  }
  return t;
}

template <typename T>
void token_logprobs(const model::BasicModel<T>& m, const model::BasicActivations<T>& acts, ChunkedLmHead<T>& head,
                    const std::int32_t* targets, T* logprob, T* entropy) {
  if (!m.lm_head_weight()) throw std::logic_error("token_logprobs: the model stage has no LM head");
  head.forward(acts.output(), acts.tokens(), m.lm_head_weight(), targets, logprob, entropy);
}

template <typename T>
void token_logprobs_backward(model::BasicModel<T>& m, model::BasicActivations<T>& acts, ChunkedLmHead<T>& head,
                             const std::int32_t* targets, const T* d_logprob, const T* d_entropy) {
  if (!m.lm_head_weight()) throw std::logic_error("token_logprobs_backward: the model stage has no LM head");
  head.backward(acts.output(), acts.tokens(), m.lm_head_weight(), targets, d_logprob, d_entropy, acts.output_grad(),
                m.lm_head_grad());
}

template class ChunkedLmHead<float>;
template class ChunkedLmHead<double>;
template void token_logprobs<float>(const model::BasicModel<float>&, const model::BasicActivations<float>&,
                                    ChunkedLmHead<float>&, const std::int32_t*, float*, float*);
template void token_logprobs<double>(const model::BasicModel<double>&, const model::BasicActivations<double>&,
                                     ChunkedLmHead<double>&, const std::int32_t*, double*, double*);
template void token_logprobs_backward<float>(model::BasicModel<float>&, model::BasicActivations<float>&,
                                             ChunkedLmHead<float>&, const std::int32_t*, const float*, const float*);
template void token_logprobs_backward<double>(model::BasicModel<double>&, model::BasicActivations<double>&,
                                              ChunkedLmHead<double>&, const std::int32_t*, const double*,
                                              const double*);

}  // namespace braid::rl
