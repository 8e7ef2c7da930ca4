// Per-token logprobs of given tokens and the entropy of the policy, by an LM-head pass
// over chunks of rows: logits exist for `chunk_rows` tokens at a time, never for the whole
// batch (the "chunked loss calculation" of the systems-for-LLM-RL notes). The backward
// recomputes each chunk's logits instead of keeping them.
//
// Vocabulary-parallel (a model under tensor parallelism, made with the model's
// constructor): each tp rank holds the rows [vocab_begin, vocab_end) of W and computes
// only its columns of the logits; per row, the maximum of the ranks' log-sum-exps and
// then the sums of exp, exp·logit and the target's logit are all-reduced (a few scalars
// per row), so the logits are never gathered. The backward all-reduces d_hidden.
#pragma once

#include "backend/backend.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <vector>

namespace braid::rl {

// Rows a chunk holds unless told: 128 on the host (the logits of a chunk stay in cache); on a
// device, as many as 256 MiB of logits hold, between 128 and 2048 in steps of 128 (a product
// of 128 rows leaves most of a GPU idle: 2048 rows of a 32k vocabulary are 256 MiB in f32).
std::int64_t default_chunk_rows(const backend::Backend& be, std::int64_t vocab, std::size_t elem_bytes);

template <typename T>
class ChunkedLmHead {
 public:
  // chunk_rows <= 0: default_chunk_rows (the backend's choice).
  ChunkedLmHead(backend::Backend& be, std::int64_t vocab, std::int64_t hidden,
                std::int64_t chunk_rows = 0);
  // The head of the model's last stage: its vocabulary slice and tp group under tensor
  // parallelism, the whole vocabulary otherwise; the logits soft-capped where the model's
  // config says (final_logit_softcapping, Gemma), the backward then keeping a second chunk
  // of logits.
  ChunkedLmHead(const model::BasicModel<T>& m, std::int64_t chunk_rows = 0);

  // targets, logprob, entropy and the gradients are device memory of the backend.
  // For each row i of hidden [rows × D] and W [vocab × D] (stored as weight.type): logprob[i] = log softmax(h_i Wᵀ)[t_i]
  // with t_i = targets[i] (0 where t_i < 0: no target), entropy[i] of that softmax.
  // logprob or entropy may be null.
  void forward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
               T* logprob, T* entropy);
  // For upstream d_logprob and d_entropy (either may be null): d_hidden += ∂/∂hidden,
  // d_weight += ∂/∂W (none when d_weight is nullptr: a frozen head). Rows with t_i < 0 get no
  // logprob gradient.
  void backward(const T* hidden, std::int64_t rows, backend::Weights weight, const std::int32_t* targets,
                const T* d_logprob, const T* d_entropy, T* d_hidden, T* d_weight);

  std::int64_t chunk_rows() const { return chunk_; }

 private:
  // Vocabulary-parallel: this rank's targets for rows [r0, r0 + n) into targets_ (the slice's
  // index, or -1; for the backward, 0 where another rank holds the target), and the
  // global statistics from the ranks' local ones (softmax_stats over the slice: lse_,
  // logprob_, entropy_), written to logprob/entropy (either may be null) and, with
  // for_backward, into lse_ and entropy_.
  void vocab_parallel_targets(const std::int32_t* targets, std::int64_t n, bool for_backward);
  void vocab_parallel_stats(std::int64_t n, T* logprob, T* entropy, bool for_backward);

  backend::Backend* be_;
  std::int64_t vocab_, hidden_, chunk_;   // vocab_: this rank's rows of W
  model::TensorParallel tp_;
  std::int64_t vocab_begin_ = 0;
  double softcap_ = 0;                     // final_logit_softcapping (0: none)
  backend::Buffer<T> logits_, lse_, logprob_, entropy_, d_hidden_;
  backend::Buffer<T> capped_;              // the backward's capped logits (softcap_ > 0)
  backend::Buffer<std::int32_t> targets_;
  std::vector<std::int32_t> host_targets_;   // the global targets of the chunk (-1: none)
};

// Next-token targets of a packed batch: row r predicts tokens[r + 1] within its
// sequence; the last row of each sequence has none (-1).
std::vector<std::int32_t> next_token_targets(const model::Batch& batch);

// Model-level conveniences on the last stage, after model.forward(batch, acts).
// logprob[r] of next-token targets, entropy[r]; -1 targets give logprob 0.
template <typename T>
void token_logprobs(const model::BasicModel<T>& m, const model::BasicActivations<T>& acts,
                    ChunkedLmHead<T>& head, const std::int32_t* targets, T* logprob, T* entropy);
// Backward of token_logprobs into acts.output_grad() and the LM head's grad.
template <typename T>
void token_logprobs_backward(model::BasicModel<T>& m, model::BasicActivations<T>& acts,
                             ChunkedLmHead<T>& head, const std::int32_t* targets,
                             const T* d_logprob, const T* d_entropy);

}  // namespace braid::rl
