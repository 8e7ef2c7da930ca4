// Embedding gather/scatter and the vector ops (axpy, scale, Σx², soft-capping, dropout).
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"
#include "backend/dropout_draw.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace braid::backend::cpu {

template <typename T>
void embedding_forward(const std::int32_t* ids, std::int64_t n, const T* table, std::int64_t dim, T* out) {
  parallel_for(n, kParallelMin / dim, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) std::copy_n(table + std::int64_t(ids[r]) * dim, dim, out + r * dim);
  });
}

// Serial: rows may repeat a token, and the scatter is cheap beside the matrix products.
template <typename T>
void embedding_backward(const std::int32_t* ids, std::int64_t n, const T* d_out, std::int64_t dim, T* d_table) {
  for (std::int64_t r = 0; r < n; ++r) {
    T* dst = d_table + std::int64_t(ids[r]) * dim;
    const T* src = d_out + r * dim;
    for (std::int64_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

template <typename T>
void axpy(std::int64_t n, T alpha, const T* x, T* y) {
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) y[i] += alpha * x[i];
  });
}

template <typename T>
void scale(std::int64_t n, T alpha, T* x) {
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) x[i] *= alpha;
  });
}

template <typename T>
double sum_squares(std::int64_t n, const T* x) {
  // Partial sums per chunk, added in chunk order: the same result for any thread count.
  std::vector<double> part(std::size_t((n + kParallelMin - 1) / kParallelMin), 0.0);
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    double s = 0;
    for (std::int64_t i = lo; i < hi; ++i) s += double(x[i]) * double(x[i]);
    part[std::size_t(lo / kParallelMin)] = s;
  });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

template <typename T>
void softcap(std::int64_t n, double cap, T* x) {
  const T c = T(cap);
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) x[i] = c * std::tanh(x[i] / c);   // as transformers: /, tanh, ·
  });
}

template <typename T>
void softcap_backward(std::int64_t n, double cap, const T* y, T* d) {
  const T c = T(cap);
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const T t = y[i] / c;
      d[i] *= T(1) - t * t;
    }
  });
}

template <typename T>
void dropout(std::int64_t rows, std::int64_t cols, const T* x, const std::uint64_t* row_keys, std::int64_t col0,
             std::uint64_t seed, double p, T* out) {
  const T kept = T(1.0 / (1.0 - p));
  parallel_for(rows, std::max<std::int64_t>(1, kParallelMin / std::max<std::int64_t>(cols, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t r = lo; r < hi; ++r)
                   for (std::int64_t c = 0; c < cols; ++c) {
                     const std::int64_t i = r * cols + c;
                     out[i] = dropout_keeps(seed, row_keys[r], col0 + c, p) ? x[i] * kept : T(0);
                   }
               });
}

#define BRAID_INSTANTIATE(T)                                                                       \
  template void embedding_forward<T>(const std::int32_t*, std::int64_t, const T*, std::int64_t, T*); \
  template void embedding_backward<T>(const std::int32_t*, std::int64_t, const T*, std::int64_t, T*); \
  template void axpy<T>(std::int64_t, T, const T*, T*);                                             \
  template void scale<T>(std::int64_t, T, T*);                                                      \
  template double sum_squares<T>(std::int64_t, const T*);                                          \
  template void softcap<T>(std::int64_t, double, T*);                                               \
  template void softcap_backward<T>(std::int64_t, double, const T*, T*);                              \
  template void dropout<T>(std::int64_t, std::int64_t, const T*, const std::uint64_t*, std::int64_t,  \
                           std::uint64_t, double, T*);
BRAID_INSTANTIATE(float)
BRAID_INSTANTIATE(double)
#undef BRAID_INSTANTIATE

}  // namespace braid::backend::cpu
