// RMSNorm (Llama): y = x · rstd · (w + offset), rstd = 1/sqrt(mean(x²) + eps), over the
// vectors backend::NormShape describes (whole rows, or each head of a row). Accumulation in
// double.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cmath>
#include <vector>

namespace braid::backend::cpu {

template <typename T>
void rmsnorm_forward(const T* x, const T* w, const NormShape& sh, T* y, T* rstd) {
  const std::int64_t dim = sh.dim, stride = sh.row_stride(), groups = sh.groups;
  const T offset = T(sh.weight_offset);
  parallel_for(sh.rows * groups, kParallelMin / dim, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t v = lo; v < hi; ++v) {
      const std::int64_t at = (v / groups) * stride + (v % groups) * dim;
      const T* xr = x + at;
      T* yr = y + at;
      double ss = 0;
      for (std::int64_t j = 0; j < dim; ++j) ss += double(xr[j]) * double(xr[j]);
      const T s = T(1.0 / std::sqrt(ss / double(dim) + sh.eps));
      rstd[v] = s;
      for (std::int64_t j = 0; j < dim; ++j) yr[j] = xr[j] * s * (w[j] + offset);
    }
  });
}

// dx += rstd · (dy·g − x̂ · mean(dy·g·x̂)) with g = w + offset,  dw += Σ dy · x̂.
template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, const NormShape& sh, T* dx, T* dw) {
  const std::int64_t dim = sh.dim, stride = sh.row_stride(), groups = sh.groups, n = sh.rows * groups;
  const T offset = T(sh.weight_offset);
  // dw: one partial row per chunk, summed in chunk order afterwards (deterministic).
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelMin / dim);
  const std::int64_t chunks = (n + grain - 1) / grain;
  std::vector<T> partial(static_cast<std::size_t>(chunks * dim), T(0));
  parallel_for(n, grain, [&](std::int64_t lo, std::int64_t hi) {
    T* dw_local = partial.data() + (lo / grain) * dim;
    for (std::int64_t v = lo; v < hi; ++v) {
      const std::int64_t at = (v / groups) * stride + (v % groups) * dim;
      const T* xr = x + at;
      const T* dyr = dy + at;
      T* dxr = dx + at;
      const T s = rstd[v];
      double dot = 0;
      for (std::int64_t j = 0; j < dim; ++j) dot += double(dyr[j]) * double(w[j] + offset) * double(xr[j]);
      const T c = T(dot / double(dim)) * s * s;
      for (std::int64_t j = 0; j < dim; ++j) {
        const T d = dyr[j];   // read before dx is written: dx may be dy
        const T g = s * (d * (w[j] + offset) - xr[j] * c);
        dxr[j] = sh.accumulate ? dxr[j] + g : g;
        dw_local[j] += d * xr[j] * s;
      }
    }
  });
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t j = 0; j < dim; ++j) dw[j] += partial[std::size_t(c * dim + j)];
}

template void rmsnorm_forward<float>(const float*, const float*, const NormShape&, float*, float*);
template void rmsnorm_forward<double>(const double*, const double*, const NormShape&, double*, double*);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*, const NormShape&, float*,
                                      float*);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*, const NormShape&,
                                       double*, double*);

}  // namespace braid::backend::cpu
