// The paged KV cache on the CPU (backend::PagedKV): the K/V write and the reference decode
// attention. A query row reads its sequence's keys block by block through the block table;
// the arithmetic is that of the contiguous decode rows in cpu/attention.cpp (dot products
// with eight partial sums, then max, exp, sum and Σ p·v in key order), so a decode step
// over the paged cache gives the numbers the contiguous cache gave.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::backend::cpu {
namespace {

template <typename T>
void check_cache_type(const PagedKV& c, const char* op) {
  if (c.dtype != dtype_of<T>() && c.dtype != DType::bf16) {
    throw std::logic_error(std::string(op) + ": a " + std::string(dtype_name(c.dtype)) + " cache with " +
                           std::string(dtype_name(dtype_of<T>())) + " ops");
  }
  if (c.block_size <= 0 || c.row <= 0) throw std::invalid_argument(std::string(op) + ": empty cache layout");
}

// Row r of the cache as T: in place when the cache holds T, else widened into buf.
template <typename T>
const T* cache_row(const void* base, DType dtype, std::int64_t r, std::int64_t row, std::int64_t col, int n, T* buf) {
  if (dtype == dtype_of<T>()) return static_cast<const T*>(base) + r * row + col;
  const auto* h = static_cast<const std::uint16_t*>(base) + r * row + col;
  for (int i = 0; i < n; ++i) buf[i] = T(bf16_to_float(h[i]));
  return buf;
}

}  // namespace

template <typename T>
void paged_kv_write(std::int64_t n, const T* k_src, const T* v_src, std::int64_t src_stride, const std::int32_t* slots,
                    const PagedKV& c) {
  check_cache_type<T>(c, "paged_kv_write");
  const std::int64_t row = c.row;
  for (std::int64_t i = 0; i < n; ++i) {
    if (slots[i] < 0) continue;
    const std::int64_t dst = std::int64_t(slots[i]) * row;
    const T* k = k_src + i * src_stride;
    const T* v = v_src + i * src_stride;
    if (c.dtype == dtype_of<T>()) {
      std::copy(k, k + row, static_cast<T*>(c.k) + dst);
      std::copy(v, v + row, static_cast<T*>(c.v) + dst);
    } else {
      auto* kd = static_cast<std::uint16_t*>(c.k) + dst;
      auto* vd = static_cast<std::uint16_t*>(c.v) + dst;
      for (std::int64_t e = 0; e < row; ++e) {
        kd[e] = float_to_bf16(float(k[e]));
        vd[e] = float_to_bf16(float(v[e]));
      }
    }
  }
}

template <typename T>
void paged_attention(const AttentionDims& d, std::int64_t n, const T* q, const PagedKV& c, const PagedRows& rows,
                     T* out) {
  check_cache_type<T>(c, "paged_attention");
  const int hd = d.head_dim;
  const int group = d.n_heads / d.n_kv_heads;
  const T scale = T(d.score_scale());
  const T cap = T(d.softcap);
  const std::int64_t out_stride = std::int64_t(d.n_heads) * hd;
  const std::int64_t tasks = n * d.n_heads;
  std::int64_t work = 0;
  for (std::int64_t i = 0; i < n; ++i) work += std::max<std::int64_t>(rows.row_ctx[i], 0);
  const std::int64_t grain = work * d.n_heads * hd > kParallelMin ? 1 : std::max<std::int64_t>(tasks, 1);
  parallel_for(tasks, grain, [&](std::int64_t t_lo, std::int64_t t_hi) {
    thread_local std::vector<T> s, kbuf, vbuf;
    kbuf.resize(std::size_t(hd));
    vbuf.resize(std::size_t(hd));
    for (std::int64_t t = t_lo; t < t_hi; ++t) {
      const std::int64_t r = t / d.n_heads;
      const int h = int(t % d.n_heads);
      const std::int64_t ctx = rows.row_ctx[r];
      if (ctx <= 0) continue;
      // The query sits at position ctx − 1 and sees keys lo .. ctx − 1.
      const std::int64_t lo = d.first_key(ctx - 1), nk = ctx - lo;
      const std::int32_t* table = rows.block_tables + std::int64_t(rows.row_seq[r]) * rows.max_blocks;
      const std::int64_t col = std::int64_t(h / group) * hd;
      auto slot = [&](std::int64_t j) {
        return std::int64_t(table[j / c.block_size]) * c.block_size + j % c.block_size;
      };
      const T* qr = q + r * d.q_stride + std::int64_t(h) * hd;
      if (s.size() < std::size_t(nk)) s.resize(std::size_t(nk));
      T m = -INFINITY;
      for (std::int64_t j = 0; j < nk; ++j) {
        T sj = dot(qr, cache_row<T>(c.k, c.dtype, slot(lo + j), c.row, col, hd, kbuf.data()), hd) * scale;
        if (cap > 0) sj = cap * std::tanh(sj / cap);
        s[std::size_t(j)] = sj;
        m = std::max(m, sj);
      }
      T l = 0;
      for (std::int64_t j = 0; j < nk; ++j) {
        s[std::size_t(j)] = std::exp(s[std::size_t(j)] - m);
        l += s[std::size_t(j)];
      }
      T* o = out + r * out_stride + std::int64_t(h) * hd;
      std::fill(o, o + hd, T(0));
      const T inv = T(1) / l;
      for (std::int64_t j = 0; j < nk; ++j) {
        const T p = s[std::size_t(j)] * inv;
        const T* vj = cache_row<T>(c.v, c.dtype, slot(lo + j), c.row, col, hd, vbuf.data());
        for (int e = 0; e < hd; ++e) o[e] += p * vj[e];
      }
    }
  });
}

template void paged_kv_write<float>(std::int64_t, const float*, const float*, std::int64_t, const std::int32_t*,
                                    const PagedKV&);
template void paged_kv_write<double>(std::int64_t, const double*, const double*, std::int64_t, const std::int32_t*,
                                     const PagedKV&);
template void paged_attention<float>(const AttentionDims&, std::int64_t, const float*, const PagedKV&,
                                     const PagedRows&, float*);
template void paged_attention<double>(const AttentionDims&, std::int64_t, const double*, const PagedKV&,
                                      const PagedRows&, double*);

}  // namespace braid::backend::cpu
