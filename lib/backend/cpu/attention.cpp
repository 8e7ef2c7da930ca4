// Causal grouped-query attention over packed segments, in blocks of query rows so that
// the products are matrix products (single-threaded BLAS inside each task):
//
//   S = scale · Q_blk · K[lo : past + end]ᵀ (soft-capped if asked),  P = softmax(S) under the
//   causal (and sliding-window) mask,  O = P · V.
//
// lo is the first key the block's first query sees (0 without a sliding window). One task per
// (segment, head) in the forward and per (segment, kv head) in the backward, so that no two
// threads write the same rows of d_k / d_v. The scores of one block live in a per-thread
// scratch that only grows; the backward recomputes P from the saved log-sum-exp, so memory is
// O(tokens · heads), never O(tokens²) per layer.
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

// A row's scores after the scale: soft-capped (Gemma 2: cap · tanh(s / cap)) or as they are.
template <typename T>
void cap_scores(T* s, std::int64_t n, T cap) {
  if (cap > 0) {
    for (std::int64_t j = 0; j < n; ++j) s[j] = cap * std::tanh(s[j] / cap);
  }
}

// Plain loops for a few query rows (row r, at position past + r, sees keys
// first_key(past + r) .. past + r): scores by dot products over the contiguous head
// dimension, then out = Σ p_j v_j.
template <typename T>
void attend_rows(const AttentionDims& d, std::int64_t past, std::int64_t rows, T scale, const T* q, const T* k,
                 const T* v, T* s, T* out, std::int64_t out_stride, T* lse, std::int64_t lse_stride) {
  const int hd = d.head_dim;
  const T cap = T(d.softcap);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* qr = q + r * d.q_stride;
    const std::int64_t lo = d.first_key(past + r), nk = past + r + 1 - lo;
    const T* kr = k + lo * d.kv_stride;
    const T* vr = v + lo * d.kv_stride;
    for (std::int64_t j = 0; j < nk; ++j) s[j] = dot(qr, kr + j * d.kv_stride, hd) * scale;
    cap_scores(s, nk, cap);
    T m = -INFINITY;
    for (std::int64_t j = 0; j < nk; ++j) m = std::max(m, s[j]);
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
      const T* vj = vr + j * d.kv_stride;
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
  const T scale = T(d.score_scale());
  const T cap = T(d.softcap);
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
      const std::int64_t lo = d.first_key(sg.past + i0);  // the first key of the block's first row
      const std::int64_t nk = sg.past + i0 + qb - lo;     // keys from lo to the last row's own
      T* s = scratch<T>(0, std::size_t(qb * nk));
      const std::int64_t row0 = sg.q_begin + i0;
      if (qb <= kLoopRows) {  // decode steps: a BLAS call per row costs more than the row
        attend_rows(d, sg.past + i0, qb, scale, q + row0 * d.q_stride + std::int64_t(h) * hd, kg, vg, s,
                    out + row0 * out_stride + std::int64_t(h) * hd, out_stride, lse + row0 * d.n_heads + h, d.n_heads);
        continue;
      }
      gemm_serial<T>(false, true, qb, nk, hd, scale, q + row0 * d.q_stride + std::int64_t(h) * hd, d.q_stride,
                     kg + lo * d.kv_stride, d.kv_stride, T(0), s, nk);
      for (std::int64_t r = 0; r < qb; ++r) {
        T* sr = s + r * nk;
        const std::int64_t p = sg.past + i0 + r;
        const std::int64_t first = d.first_key(p) - lo, valid = p + 1 - lo;  // row r's keys: [first, valid)
        cap_scores(sr + first, valid - first, cap);
        const T m = *std::max_element(sr + first, sr + valid);
        T l = 0;
        for (std::int64_t j = first; j < valid; ++j) {
          sr[j] = std::exp(sr[j] - m);
          l += sr[j];
        }
        const T inv = T(1) / l;
        for (std::int64_t j = first; j < valid; ++j) sr[j] *= inv;
        std::fill(sr, sr + first, T(0));
        std::fill(sr + valid, sr + nk, T(0));
        lse[(row0 + r) * d.n_heads + h] = m + std::log(l);
      }
      gemm_serial<T>(false, false, qb, hd, nk, T(1), s, nk, vg + lo * d.kv_stride, d.kv_stride, T(0),
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
  const T scale = T(d.score_scale());
  const T cap = T(d.softcap);
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
        const std::int64_t lo = d.first_key(sg.past + i0);
        const std::int64_t nk = sg.past + i0 + qb - lo;
        const std::int64_t kv_lo = kv0 + lo * d.kv_stride;
        const std::int64_t row0 = sg.q_begin + i0;
        const T* qh = q + row0 * d.q_stride + std::int64_t(h) * hd;
        const T* oh = out + row0 * out_stride + std::int64_t(h) * hd;
        const T* doh = d_out + row0 * out_stride + std::int64_t(h) * hd;
        T* p = scratch<T>(0, std::size_t(qb * nk));
        T* dp = scratch<T>(1, std::size_t(qb * nk));
        gemm_serial<T>(false, true, qb, nk, hd, scale, qh, d.q_stride, k + kv_lo, d.kv_stride, T(0), p, nk);
        gemm_serial<T>(false, true, qb, nk, hd, T(1), doh, out_stride, v + kv_lo, d.kv_stride, T(0), dp, nk);
        for (std::int64_t r = 0; r < qb; ++r) {
          T* pr = p + r * nk;
          T* dpr = dp + r * nk;
          const std::int64_t pos = sg.past + i0 + r;
          const std::int64_t first = d.first_key(pos) - lo, valid = pos + 1 - lo;
          const T li = lse[(row0 + r) * d.n_heads + h];
          T di = 0;  // Σ_c dO·O = Σ_j P·dP
          for (int c = 0; c < hd; ++c) di += doh[r * out_stride + c] * oh[r * out_stride + c];
          for (std::int64_t j = first; j < valid; ++j) {
            if (cap > 0) {  // S = cap·tanh(s / cap): dS/ds = 1 − tanh²
              const T th = std::tanh(pr[j] / cap);
              pr[j] = std::exp(cap * th - li);
              dpr[j] = pr[j] * (dpr[j] - di) * (T(1) - th * th) * scale;
            } else {
              pr[j] = std::exp(pr[j] - li);
              dpr[j] = pr[j] * (dpr[j] - di) * scale;  // dS, with the scale of S = scale·q·k
            }
          }
          std::fill(pr, pr + first, T(0));
          std::fill(dpr, dpr + first, T(0));
          std::fill(pr + valid, pr + nk, T(0));
          std::fill(dpr + valid, dpr + nk, T(0));
        }
        gemm_serial<T>(false, false, qb, hd, nk, T(1), dp, nk, k + kv_lo, d.kv_stride, T(0),
                       d_q + row0 * d.q_stride + std::int64_t(h) * hd, d.q_stride);
        gemm_serial<T>(true, false, nk, hd, qb, T(1), dp, nk, qh, d.q_stride, T(1), d_k + kv_lo, d.kv_stride);
        gemm_serial<T>(true, false, nk, hd, qb, T(1), p, nk, doh, out_stride, T(1), d_v + kv_lo, d.kv_stride);
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
