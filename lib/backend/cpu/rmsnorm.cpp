// RMSNorm (Llama): y = x · rstd · w, rstd = 1/sqrt(mean(x²) + eps). Accumulation in double.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cmath>
#include <vector>

namespace braid::backend::cpu {

template <typename T>
void rmsnorm_forward(const T* x, const T* w, std::int64_t n, std::int64_t dim, double eps, T* y, T* rstd) {
  parallel_for(n, kParallelMin / dim, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * dim;
      T* yr = y + r * dim;
      double ss = 0;
      for (std::int64_t j = 0; j < dim; ++j) ss += double(xr[j]) * double(xr[j]);
      const T s = T(1.0 / std::sqrt(ss / double(dim) + eps));
      rstd[r] = s;
      for (std::int64_t j = 0; j < dim; ++j) yr[j] = xr[j] * s * w[j];
    }
  });
}

// dx += rstd · (dy·w − x̂ · mean(dy·w·x̂)),  dw += Σ_rows dy · x̂.
template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, std::int64_t n,
                      std::int64_t dim, T* dx, T* dw) {
  // dw: one partial row per chunk, summed in chunk order afterwards (deterministic).
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelMin / dim);
  const std::int64_t chunks = (n + grain - 1) / grain;
  std::vector<T> partial(static_cast<std::size_t>(chunks * dim), T(0));
  parallel_for(n, grain, [&](std::int64_t lo, std::int64_t hi) {
    T* dw_local = partial.data() + (lo / grain) * dim;
    for (std::int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * dim;
      const T* dyr = dy + r * dim;
      T* dxr = dx + r * dim;
      const T s = rstd[r];
      double dot = 0;
      for (std::int64_t j = 0; j < dim; ++j) dot += double(dyr[j]) * double(w[j]) * double(xr[j]);
      const T c = T(dot / double(dim)) * s * s;
      for (std::int64_t j = 0; j < dim; ++j) {
        dxr[j] += s * (dyr[j] * w[j] - xr[j] * c);
        dw_local[j] += dyr[j] * xr[j] * s;
      }
    }
  });
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t j = 0; j < dim; ++j) dw[j] += partial[std::size_t(c * dim + j)];
}

template void rmsnorm_forward<float>(const float*, const float*, std::int64_t, std::int64_t, double, float*, float*);
template void rmsnorm_forward<double>(const double*, const double*, std::int64_t, std::int64_t, double, double*, double*);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*, std::int64_t,
                                      std::int64_t, float*, float*);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*,
                                       std::int64_t, std::int64_t, double*, double*);

}  // namespace braid::backend::cpu
