// Causal grouped-query attention over packed segments. One task per (segment, head)
// in the forward and per (segment, kv head) in the backward, so that no two threads
// write the same row of d_k / d_v. Scores for one query row live in a per-thread
// scratch that only grows; probabilities are recomputed in the backward from the
// saved log-sum-exp, so memory is O(tokens · heads), not O(tokens²).
#include "backend/cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace braid::backend::cpu {
namespace {

template <typename T>
T dot(const T* a, const T* b, int n) {
  T s = 0;
  for (int j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

template <typename T>
std::vector<T>& scratch(std::size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

}  // namespace

template <typename T>
void attention_forward(const AttentionDims& d, std::span<const AttentionSegment> segs, const T* q,
                       const T* k, const T* v, T* out, T* lse) {
  const int hd = d.head_dim;
  const int group = d.n_heads / d.n_kv_heads;
  const T scale = T(1.0 / std::sqrt(double(hd)));
  const std::int64_t out_stride = std::int64_t(d.n_heads) * hd;
  const std::int64_t tasks = std::int64_t(segs.size()) * d.n_heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const AttentionSegment& sg = segs[std::size_t(t / d.n_heads)];
    const int h = int(t % d.n_heads);
    const int g = h / group;
    std::vector<T>& s = scratch<T>(std::size_t(sg.past + sg.q_len));
    for (std::int64_t i = 0; i < sg.q_len; ++i) {
      const std::int64_t row = sg.q_begin + i;
      const T* qi = q + row * d.q_stride + std::int64_t(h) * hd;
      const std::int64_t nk = sg.past + i + 1;
      T m = -INFINITY;
      for (std::int64_t j = 0; j < nk; ++j) {
        s[j] = dot(qi, k + (sg.kv_begin + j) * d.kv_stride + std::int64_t(g) * hd, hd) * scale;
        m = std::max(m, s[j]);
      }
      T l = 0;
      for (std::int64_t j = 0; j < nk; ++j) {
        s[j] = std::exp(s[j] - m);
        l += s[j];
      }
      T* oi = out + row * out_stride + std::int64_t(h) * hd;
      std::fill(oi, oi + hd, T(0));
      const T inv = T(1) / l;
      for (std::int64_t j = 0; j < nk; ++j) {
        const T p = s[j] * inv;
        const T* vj = v + (sg.kv_begin + j) * d.kv_stride + std::int64_t(g) * hd;
        for (int c = 0; c < hd; ++c) oi[c] += p * vj[c];
      }
      lse[row * d.n_heads + h] = m + std::log(l);
    }
  }
}

template <typename T>
void attention_backward(const AttentionDims& d, std::span<const AttentionSegment> segs, const T* q,
                        const T* k, const T* v, const T* out, const T* lse, const T* d_out, T* d_q,
                        T* d_k, T* d_v) {
  const int hd = d.head_dim;
  const int group = d.n_heads / d.n_kv_heads;
  const T scale = T(1.0 / std::sqrt(double(hd)));
  const std::int64_t out_stride = std::int64_t(d.n_heads) * hd;
  const std::int64_t tasks = std::int64_t(segs.size()) * d.n_kv_heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const AttentionSegment& sg = segs[std::size_t(t / d.n_kv_heads)];
    const int g = int(t % d.n_kv_heads);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (std::int64_t i = 0; i < sg.q_len; ++i) {
        const std::int64_t row = sg.q_begin + i;
        const T* qi = q + row * d.q_stride + std::int64_t(h) * hd;
        const T* oi = out + row * out_stride + std::int64_t(h) * hd;
        const T* doi = d_out + row * out_stride + std::int64_t(h) * hd;
        T* dqi = d_q + row * d.q_stride + std::int64_t(h) * hd;
        const std::int64_t nk = sg.past + i + 1;
        const T li = lse[row * d.n_heads + h];
        const T di = dot(doi, oi, hd);
        std::fill(dqi, dqi + hd, T(0));
        for (std::int64_t j = 0; j < nk; ++j) {
          const std::int64_t kr = (sg.kv_begin + j) * d.kv_stride + std::int64_t(g) * hd;
          const T pj = std::exp(dot(qi, k + kr, hd) * scale - li);
          const T dp = dot(doi, v + kr, hd);
          const T ds = pj * (dp - di) * scale;
          const T* kj = k + kr;
          T* dkj = d_k + kr;
          T* dvj = d_v + kr;
          for (int c = 0; c < hd; ++c) {
            dqi[c] += ds * kj[c];
            dkj[c] += ds * qi[c];
            dvj[c] += pj * doi[c];
          }
        }
      }
    }
  }
}

template void attention_forward<float>(const AttentionDims&, std::span<const AttentionSegment>, const float*,
                                       const float*, const float*, float*, float*);
template void attention_forward<double>(const AttentionDims&, std::span<const AttentionSegment>, const double*,
                                        const double*, const double*, double*, double*);
template void attention_backward<float>(const AttentionDims&, std::span<const AttentionSegment>, const float*,
                                        const float*, const float*, const float*, const float*, const float*,
                                        float*, float*, float*);
template void attention_backward<double>(const AttentionDims&, std::span<const AttentionSegment>,
                                         const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*);

}  // namespace braid::backend::cpu
