// Row statistics of a softmax over the vocabulary on CUDA (the chunked LM-head pass): per
// row of logits, the log-sum-exp, the logprob of a target and the entropy; the backward
// turns the logits into their gradient in place. One block per row; sums in f64.
//   ∂logprob_t/∂z_j = δ_jt − p_j,   ∂H/∂z_j = −p_j · (log p_j + H).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void softmax_stats(cudaStream_t s, const float* logits, std::int64_t rows, std::int64_t vocab,
                   const std::int32_t* targets, float* lse, float* logprob, float* entropy);
void softmax_stats_backward(cudaStream_t s, float* logits, std::int64_t rows, std::int64_t vocab,
                            const std::int32_t* targets, const float* lse, const float* entropy,
                            const float* d_logprob, const float* d_entropy);

}  // namespace braid::backend::cuda
