// Sampling a token per row of logits on CUDA (Ops::sample), the same distribution and the
// same draw as the CPU's sample_row: one block per row. Without truncation the draw walks
// the vocabulary in id order (a block-wide prefix sum); with top-k / top-p the candidates
// are ordered most likely first (ties: lower id first) without sorting, by bisecting on the
// logits' bits: the k-th largest logit, the smallest set holding top_p of the mass, and
// the token where the cumulative mass passes the draw are each found in 32 counting passes
// over the row, ties at the boundary resolved in id order by a prefix sum. Correct, not
// tuned (generation on GPU is the next issue's).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// SamplingSpec (backend.hpp), which the kernels' C++17 cannot include; greedy as spec.greedy().
struct SampleParams {
  double temperature;
  int top_k;
  double top_p;
  bool greedy;
};

void sample(cudaStream_t s, const float* logits, std::int64_t rows, std::int64_t vocab, const SampleParams& spec,
            const double* uniforms, std::int32_t* tokens, float* logprob, float* raw_logprob);

}  // namespace braid::backend::cuda
