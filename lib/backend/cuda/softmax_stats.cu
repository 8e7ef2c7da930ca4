#include "backend/cuda/softmax_stats.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <cfloat>
#include <stdexcept>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 512;

__global__ void softmax_stats_kernel(const float* logits, std::int64_t vocab, const std::int32_t* targets, float* lse,
                                     float* logprob, float* entropy) {
  const std::int64_t r = blockIdx.x;
  const float* z = logits + r * vocab;
  float m = -FLT_MAX;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, z[j]);
  m = block_max(m, -FLT_MAX);
  double s = 0, sz = 0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float d = z[j] - m;
    const float e = expf(d);
    s += double(e);
    sz += double(e * d);
  }
  s = block_sum(s);
  sz = block_sum(sz);
  if (threadIdx.x != 0) return;
  const double l = double(m) + log(s);
  if (lse) lse[r] = float(l);
  if (logprob) logprob[r] = targets && targets[r] >= 0 ? float(double(z[targets[r]]) - l) : 0.0f;
  if (entropy) entropy[r] = float(log(s) - sz / s);
}

__global__ void softmax_stats_backward_kernel(float* logits, std::int64_t vocab, const std::int32_t* targets,
                                              const float* lse, const float* entropy, const float* d_logprob,
                                              const float* d_entropy) {
  const std::int64_t r = blockIdx.x;
  float* z = logits + r * vocab;
  const std::int32_t t = targets ? targets[r] : -1;
  const float glp = (d_logprob && t >= 0) ? d_logprob[r] : 0.0f;
  const float gh = d_entropy ? d_entropy[r] : 0.0f;
  const float l = lse[r];
  const float h = entropy ? entropy[r] : 0.0f;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float logp = z[j] - l;
    const float p = expf(logp);
    z[j] = -glp * p - gh * p * (logp + h) + (j == t ? glp : 0.0f);
  }
}

}  // namespace

void softmax_stats(cudaStream_t s, const float* logits, std::int64_t rows, std::int64_t vocab,
                   const std::int32_t* targets, float* lse, float* logprob, float* entropy) {
  if (rows <= 0) return;
  if (rows > 0x7fffffff) throw std::invalid_argument("softmax_stats: more than 2^31 rows");
  softmax_stats_kernel<<<unsigned(rows), kThreads, 0, s>>>(logits, vocab, targets, lse, logprob, entropy);
  check_launch("softmax_stats");
}

void softmax_stats_backward(cudaStream_t s, float* logits, std::int64_t rows, std::int64_t vocab,
                            const std::int32_t* targets, const float* lse, const float* entropy,
                            const float* d_logprob, const float* d_entropy) {
  if (rows <= 0) return;
  if (rows > 0x7fffffff) throw std::invalid_argument("softmax_stats_backward: more than 2^31 rows");
  softmax_stats_backward_kernel<<<unsigned(rows), kThreads, 0, s>>>(logits, vocab, targets, lse, entropy, d_logprob,
                                                                    d_entropy);
  check_launch("softmax_stats_backward");
}

}  // namespace braid::backend::cuda
