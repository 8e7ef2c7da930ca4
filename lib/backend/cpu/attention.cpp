// Causal grouped-query attention over packed segments, in blocks of query rows so that
// the products are matrix products (single-threaded BLAS inside each task):
//
//   S = Q_blk · K[0 : past + end]ᵀ / √d,  P = softmax(S) under the causal mask,  O = P · V.
//
// One task per (segment, head) in the forward and per (segment, kv head) in the backward,
// so that no two threads write the same rows of d_k / d_v. The scores of one block live in
// a per-thread scratch that only grows; the backward recomputes P from the saved
// log-sum-exp, so memory is O(tokens · heads), never O(tokens²) per layer.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace braid::backend::cpu {
namespace {

constexpr std::int64_t kQueryBlock = 64;

template <typename T>
T* scratch(int which, std::size_t n) {
  thread_local std::vector<T> buf[2];
  if (buf[which].size() < n) buf[which].resize(n);
  return buf[which].data();
}

constexpr std::int64_t kLoopRows = 4;

// Plain loops for a few query rows (row r sees keys 0 .. past + r): scores by dot products
// over the contiguous head dimension, then out = Σ p_j v_j.
template <typename T>
void attend_rows(std::int64_t past, std::int64_t rows, int hd, T scale, const T* q, std::int64_t q_stride,
                 const T* k, const T* v, std::int64_t kv_stride, T* s, T* out, std::int64_t out_stride, T* lse,
                 std::int64_t lse_stride) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* qr = q + r * q_stride;
    const std::int64_t nk = past + r + 1;
    T m = -INFINITY;
    for (std::int64_t j = 0; j < nk; ++j) {
      s[j] = dot(qr, k + j * kv_stride, hd) * scale;
      m = std::max(m, s[j]);
    }
    T l = 0;
    for (std::int64_t j = 0; j < nk; ++j) {
      s[j] = std::exp(s[j] - m);
      l += s[j];
    }
    T* o = out + r * out_stride;
    std::fill(o, o + hd, T(0));
    const T inv = T(1) / l;
    for (std::int64_t j = 0; j < nk; ++j) {
      const T p = s[j] * inv;
      const T* vj = v + j * kv_stride;
      for (int c = 0; c < hd; ++c) o[c] += p * vj[c];
    }
    lse[r * lse_stride] = m + std::log(l);
  }
}

std::int64_t work_of(const AttentionDims& d, std::span<const AttentionSegment> segs) {
  std::int64_t w = 0;
  for (const auto& s : segs) w += s.q_len * (s.past + s.q_len);
  return w * d.n_heads * d.head_dim;
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
  const std::int64_t grain = work_of(d, segs) > kParallelMin ? 1 : tasks;
  parallel_for(tasks, grain, [&](std::int64_t t_lo, std::int64_t t_hi) {
  for (std::int64_t t = t_lo; t < t_hi; ++t) {
    const AttentionSegment& sg = segs[std::size_t(t / d.n_heads)];
    const int h = int(t % d.n_heads);
    const T* kg = k + sg.kv_begin * d.kv_stride + std::int64_t(h / group) * hd;
    const T* vg = v + sg.kv_begin * d.kv_stride + std::int64_t(h / group) * hd;
    for (std::int64_t i0 = 0; i0 < sg.q_len; i0 += kQueryBlock) {
      const std::int64_t qb = std::min(kQueryBlock, sg.q_len - i0);
      const std::int64_t nk = sg.past + i0 + qb;  // keys the last row of the block sees
      T* s = scratch<T>(0, std::size_t(qb * nk));
      const std::int64_t row0 = sg.q_begin + i0;
      if (qb <= kLoopRows) {  // decode steps: a BLAS call per row costs more than the row
        attend_rows(sg.past + i0, qb, hd, scale, q + row0 * d.q_stride + std::int64_t(h) * hd, d.q_stride, kg, vg,
                    d.kv_stride, s, out + row0 * out_stride + std::int64_t(h) * hd, out_stride,
                    lse + row0 * d.n_heads + h, d.n_heads);
        continue;
      }
      gemm_serial<T>(false, true, qb, nk, hd, scale, q + row0 * d.q_stride + std::int64_t(h) * hd, d.q_stride, kg,
                     d.kv_stride, T(0), s, nk);
      for (std::int64_t r = 0; r < qb; ++r) {
        T* sr = s + r * nk;
        const std::int64_t valid = sg.past + i0 + r + 1;
        const T m = *std::max_element(sr, sr + valid);
        T l = 0;
        for (std::int64_t j = 0; j < valid; ++j) {
          sr[j] = std::exp(sr[j] - m);
          l += sr[j];
        }
        const T inv = T(1) / l;
        for (std::int64_t j = 0; j < valid; ++j) sr[j] *= inv;
        std::fill(sr + valid, sr + nk, T(0));
        lse[(row0 + r) * d.n_heads + h] = m + std::log(l);
      }
      gemm_serial<T>(false, false, qb, hd, nk, T(1), s, nk, vg, d.kv_stride, T(0),
                     out + row0 * out_stride + std::int64_t(h) * hd, out_stride);
    }
  }
  });
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
  const std::int64_t grain = work_of(d, segs) > kParallelMin ? 1 : tasks;
  parallel_for(tasks, grain, [&](std::int64_t t_lo, std::int64_t t_hi) {
  for (std::int64_t t = t_lo; t < t_hi; ++t) {
    const AttentionSegment& sg = segs[std::size_t(t / d.n_kv_heads)];
    const int g = int(t % d.n_kv_heads);
    const std::int64_t kv0 = sg.kv_begin * d.kv_stride + std::int64_t(g) * hd;
    for (int h = g * group; h < (g + 1) * group; ++h) {
      for (std::int64_t i0 = 0; i0 < sg.q_len; i0 += kQueryBlock) {
        const std::int64_t qb = std::min(kQueryBlock, sg.q_len - i0);
        const std::int64_t nk = sg.past + i0 + qb;
        const std::int64_t row0 = sg.q_begin + i0;
        const T* qh = q + row0 * d.q_stride + std::int64_t(h) * hd;
        const T* oh = out + row0 * out_stride + std::int64_t(h) * hd;
        const T* doh = d_out + row0 * out_stride + std::int64_t(h) * hd;
        T* p = scratch<T>(0, std::size_t(qb * nk));
        T* dp = scratch<T>(1, std::size_t(qb * nk));
        gemm_serial<T>(false, true, qb, nk, hd, scale, qh, d.q_stride, k + kv0, d.kv_stride, T(0), p, nk);
        gemm_serial<T>(false, true, qb, nk, hd, T(1), doh, out_stride, v + kv0, d.kv_stride, T(0), dp, nk);
        for (std::int64_t r = 0; r < qb; ++r) {
          T* pr = p + r * nk;
          T* dpr = dp + r * nk;
          const std::int64_t valid = sg.past + i0 + r + 1;
          const T li = lse[(row0 + r) * d.n_heads + h];
          T di = 0;  // Σ_c dO·O = Σ_j P·dP
          for (int c = 0; c < hd; ++c) di += doh[r * out_stride + c] * oh[r * out_stride + c];
          for (std::int64_t j = 0; j < valid; ++j) {
            pr[j] = std::exp(pr[j] - li);
            dpr[j] = pr[j] * (dpr[j] - di) * scale;  // dS, with the 1/√d of S = q·k/√d
          }
          std::fill(pr + valid, pr + nk, T(0));
          std::fill(dpr + valid, dpr + nk, T(0));
        }
        gemm_serial<T>(false, false, qb, hd, nk, T(1), dp, nk, k + kv0, d.kv_stride, T(0),
                       d_q + row0 * d.q_stride + std::int64_t(h) * hd, d.q_stride);
        gemm_serial<T>(true, false, nk, hd, qb, T(1), dp, nk, qh, d.q_stride, T(1), d_k + kv0, d.kv_stride);
        gemm_serial<T>(true, false, nk, hd, qb, T(1), p, nk, doh, out_stride, T(1), d_v + kv0, d.kv_stride);
      }
    }
  }
  });
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
