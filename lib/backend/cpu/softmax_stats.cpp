// Row statistics of a softmax over the vocabulary (log-sum-exp, logprob of a target,
// entropy) and their backward, for the chunked LM-head pass.
//
//   ∂logprob_t/∂z_j = δ_jt − p_j,   ∂H/∂z_j = −p_j · (log p_j + H).
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <algorithm>
#include <cmath>

namespace braid::backend::cpu {

template <typename T>
void softmax_stats(const T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                   T* lse, T* logprob, T* entropy) {
  parallel_for(rows, kParallelMin / vocab, [&](std::int64_t lo, std::int64_t hi) {
  for (std::int64_t r = lo; r < hi; ++r) {
    const T* z = logits + r * vocab;
    const T m = *std::max_element(z, z + vocab);
    double s = 0, sz = 0;
    for (std::int64_t j = 0; j < vocab; ++j) {
      const T d = z[j] - m;
      const T e = std::exp(d);  // float exp for float: the loop is exp-bound
      s += double(e);
      sz += double(e * d);
    }
    const double l = double(m) + std::log(s);
    if (lse) lse[r] = T(l);
    if (logprob) logprob[r] = targets && targets[r] >= 0 ? T(double(z[targets[r]]) - l) : T(0);
    // H = lse − Σ p z = log s − Σ p (z − m)
    if (entropy) entropy[r] = T(std::log(s) - sz / s);
  }
  });
}

template <typename T>
void softmax_stats_backward(T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                            const T* lse, const T* entropy, const T* d_logprob, const T* d_entropy) {
  parallel_for(rows, kParallelMin / vocab, [&](std::int64_t lo, std::int64_t hi) {
  for (std::int64_t r = lo; r < hi; ++r) {
    T* z = logits + r * vocab;
    const std::int32_t t = targets ? targets[r] : -1;
    const T glp = (d_logprob && t >= 0) ? d_logprob[r] : T(0);
    const T gh = d_entropy ? d_entropy[r] : T(0);
    const T l = lse[r];
    const T h = entropy ? entropy[r] : T(0);
    for (std::int64_t j = 0; j < vocab; ++j) {
      const T logp = z[j] - l;
      const T p = std::exp(logp);
      z[j] = -glp * p - gh * p * (logp + h);
    }
    if (t >= 0) z[t] += glp;
  }
  });
}

template void softmax_stats<float>(const float*, std::int64_t, std::int64_t, const std::int32_t*, float*,
                                   float*, float*);
template void softmax_stats<double>(const double*, std::int64_t, std::int64_t, const std::int32_t*, double*,
                                    double*, double*);
template void softmax_stats_backward<float>(float*, std::int64_t, std::int64_t, const std::int32_t*,
                                            const float*, const float*, const float*, const float*);
template void softmax_stats_backward<double>(double*, std::int64_t, std::int64_t, const std::int32_t*,
                                             const double*, const double*, const double*, const double*);

}  // namespace braid::backend::cpu
