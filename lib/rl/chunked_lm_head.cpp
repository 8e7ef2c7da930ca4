#include "rl/chunked_lm_head.hpp"

#include "comm/communicator.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::rl {

std::int64_t default_chunk_rows(const backend::Backend& be, std::int64_t vocab, std::size_t elem_bytes) {
  if (be.host_accessible() || vocab <= 0) return 128;
  const std::int64_t fit = (std::int64_t(256) << 20) / (vocab * std::int64_t(elem_bytes));
  return std::clamp<std::int64_t>(fit / 128 * 128, 128, 2048);
}

template <typename T>
ChunkedLmHead<T>::ChunkedLmHead(backend::Backend& be, std::int64_t vocab, std::int64_t hidden,
                                std::int64_t chunk_rows)
    : be_(&be), vocab_(vocab), hidden_(hidden),
      chunk_(chunk_rows > 0 ? chunk_rows : default_chunk_rows(be, vocab, sizeof(T))) {
  if (vocab <= 0 || hidden <= 0) throw std::invalid_argument("ChunkedLmHead: sizes must be positive");
  logits_ = backend::Buffer<T>(be, std::size_t(chunk_ * vocab_));
  lse_ = backend::Buffer<T>(be, std::size_t(chunk_));
  logprob_ = backend::Buffer<T>(be, std::size_t(chunk_));
  entropy_ = backend::Buffer<T>(be, std::size_t(chunk_));
}

template <typename T>
ChunkedLmHead<T>::ChunkedLmHead(const model::BasicModel<T>& m, std::int64_t chunk_rows)
    : ChunkedLmHead(m.backend(), m.vocab_slice().second - m.vocab_slice().first, m.config().hidden_size, chunk_rows) {
  tp_ = m.tensor_parallel();
  vocab_begin_ = m.vocab_slice().first;
  softcap_ = m.config().final_logit_softcapping;
  if (softcap_ > 0) capped_ = backend::Buffer<T>(*be_, std::size_t(chunk_ * vocab_));
  if (tp_.size > 1) {
    if (!tp_.group) throw std::logic_error("ChunkedLmHead: a tensor-parallel model without its tp group");
    targets_ = backend::Buffer<std::int32_t>(*be_, std::size_t(chunk_));
    d_hidden_ = backend::Buffer<T>(*be_, std::size_t(chunk_ * hidden_));
  }
}

template <typename T>
void ChunkedLmHead<T>::vocab_parallel_targets(const std::int32_t* targets, std::int64_t n, bool for_backward) {
  host_targets_.assign(std::size_t(n), -1);
  if (targets) be_->copy_to_host(host_targets_.data(), targets, std::size_t(n) * sizeof(std::int32_t));
  std::vector<std::int32_t> local(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < local.size(); ++i) {
    const std::int32_t t = host_targets_[i];
    const bool own = t >= vocab_begin_ && t < vocab_begin_ + vocab_;
    // The backward needs a target on every row that has one: column 0 stands in for a
    // target another rank holds, and its +d_logprob is taken back afterwards.
    local[i] = own ? std::int32_t(t - vocab_begin_) : (t >= 0 && for_backward ? 0 : -1);
  }
  be_->copy_to_device(targets_.data(), local.data(), local.size() * sizeof(std::int32_t));
}

template <typename T>
void ChunkedLmHead<T>::vocab_parallel_stats(std::int64_t n, T* logprob, T* entropy, bool for_backward) {
  const std::size_t rows = std::size_t(n);
  std::vector<T> lse(rows), lp(rows), h(rows);
  be_->copy_to_host(lse.data(), lse_.data(), rows * sizeof(T));
  be_->copy_to_host(lp.data(), logprob_.data(), rows * sizeof(T));
  be_->copy_to_host(h.data(), entropy_.data(), rows * sizeof(T));
  // Per row, over the ranks r: lse = M + log Σ e^(lse_r − M) with M = max lse_r;
  // Σ_j e^(z_j) z_j = e^(lse_r) (lse_r − H_r) gives the entropy H = lse − Σ p_j z_j;
  // the target's logit z_t = logprob_r + lse_r on the rank that holds it.
  std::vector<double> top(rows), sums(3 * rows);
  for (std::size_t i = 0; i < rows; ++i) top[i] = double(lse[i]);
  tp_.group->all_reduce(std::span<double>(top), comm::ReduceOp::max);
  for (std::size_t i = 0; i < rows; ++i) {
    const double e = std::exp(double(lse[i]) - top[i]);
    const std::int32_t t = host_targets_[i];
    const bool own = t >= vocab_begin_ && t < vocab_begin_ + vocab_;
    sums[3 * i] = e;
    sums[3 * i + 1] = e * (double(lse[i]) - double(h[i]));
    sums[3 * i + 2] = own ? double(lp[i]) + double(lse[i]) : 0.0;
  }
  tp_.group->all_reduce(std::span<double>(sums), comm::ReduceOp::sum);
  for (std::size_t i = 0; i < rows; ++i) {
    const double g_lse = top[i] + std::log(sums[3 * i]);
    lse[i] = T(g_lse);
    h[i] = T(g_lse - sums[3 * i + 1] / sums[3 * i]);
    lp[i] = host_targets_[i] >= 0 ? T(sums[3 * i + 2] - g_lse) : T(0);
  }
  if (logprob) be_->copy_to_device(logprob, lp.data(), rows * sizeof(T));
  if (entropy) be_->copy_to_device(entropy, h.data(), rows * sizeof(T));
  if (for_backward) {
    be_->copy_to_device(lse_.data(), lse.data(), rows * sizeof(T));
    be_->copy_to_device(entropy_.data(), h.data(), rows * sizeof(T));
  }
}

template <typename T>
void ChunkedLmHead<T>::forward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
                               T* logprob, T* entropy) {
  backend::Ops<T>& ops = be_->ops<T>();
  backend::PrecisionScope precision(*be_, weight.type);   // bf16 weights: bf16 products
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_) {
    const std::int64_t n = std::min(chunk_, rows - r0);
    ops.gemm(false, true, n, vocab_, hidden_, T(1), hidden + r0 * hidden_, hidden_, weight, hidden_, T(0),
             logits_.data(), vocab_);
    if (softcap_ > 0) ops.softcap(n * vocab_, softcap_, logits_.data());
    if (tp_.size > 1) {
      vocab_parallel_targets(targets ? targets + r0 : nullptr, n, false);
      ops.softmax_stats(logits_.data(), n, vocab_, targets_.data(), lse_.data(), logprob_.data(), entropy_.data());
      vocab_parallel_stats(n, logprob ? logprob + r0 : nullptr, entropy ? entropy + r0 : nullptr, false);
      continue;
    }
    ops.softmax_stats(logits_.data(), n, vocab_, targets ? targets + r0 : nullptr, lse_.data(),
                      logprob ? logprob + r0 : nullptr, entropy ? entropy + r0 : nullptr);
  }
}

template <typename T>
void ChunkedLmHead<T>::backward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
                                const T* d_logprob, const T* d_entropy, T* d_hidden, T* d_weight) {
  backend::Ops<T>& ops = be_->ops<T>();
  backend::PrecisionScope precision(*be_, weight.type);
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk_) {
    const std::int64_t n = std::min(chunk_, rows - r0);
    const T* h = hidden + r0 * hidden_;
    const std::int32_t* t = targets ? targets + r0 : nullptr;
    ops.gemm(false, true, n, vocab_, hidden_, T(1), h, hidden_, weight, hidden_, T(0), logits_.data(), vocab_);
    if (softcap_ > 0) {
      ops.softcap(n * vocab_, softcap_, logits_.data());
      be_->copy(capped_.data(), logits_.data(), std::size_t(n * vocab_) * sizeof(T));
    }
    // d_logits of the capped logits back through the cap (after the softmax's backward).
    auto uncap = [&] {
      if (softcap_ > 0) ops.softcap_backward(n * vocab_, softcap_, capped_.data(), logits_.data());
    };
    if (tp_.size > 1) {
      vocab_parallel_targets(t, n, true);
      ops.softmax_stats(logits_.data(), n, vocab_, targets_.data(), lse_.data(), logprob_.data(), entropy_.data());
      vocab_parallel_stats(n, nullptr, nullptr, true);
      ops.softmax_stats_backward(logits_.data(), n, vocab_, targets_.data(), lse_.data(), entropy_.data(),
                                 d_logprob ? d_logprob + r0 : nullptr, d_entropy ? d_entropy + r0 : nullptr);
      for (std::int64_t i = 0; d_logprob && i < n; ++i) {
        const std::int32_t g = host_targets_[std::size_t(i)];
        if (g >= 0 && !(g >= vocab_begin_ && g < vocab_begin_ + vocab_))
          ops.axpy(1, T(-1), d_logprob + r0 + i, logits_.data() + i * vocab_);
      }
      uncap();
      // d_hidden is the sum of every rank's d_logits · W slice.
      ops.gemm(false, false, n, hidden_, vocab_, T(1), logits_.data(), vocab_, weight, hidden_, T(0),
               d_hidden_.data(), hidden_);
      model::tp_all_reduce(*be_, tp_, d_hidden_.data(), n * hidden_);
      ops.axpy(n * hidden_, T(1), d_hidden_.data(), d_hidden + r0 * hidden_);
      if (d_weight) ops.gemm(true, false, vocab_, hidden_, n, T(1), logits_.data(), vocab_, h, hidden_, T(1), d_weight, hidden_);
      continue;
    }
    ops.softmax_stats(logits_.data(), n, vocab_, t, lse_.data(), nullptr, entropy_.data());
    ops.softmax_stats_backward(logits_.data(), n, vocab_, t, lse_.data(), entropy_.data(),
                               d_logprob ? d_logprob + r0 : nullptr, d_entropy ? d_entropy + r0 : nullptr);
    uncap();
    if (d_weight) {
      ops.linear_backward(n, vocab_, hidden_, logits_.data(), weight, h, T(1), d_hidden + r0 * hidden_, d_weight);
    } else {   // a frozen head (LoRA): d_hidden alone
      ops.gemm(false, false, n, hidden_, vocab_, T(1), logits_.data(), vocab_, weight, hidden_, T(1),
               d_hidden + r0 * hidden_, hidden_);
    }
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
