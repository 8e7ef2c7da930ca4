// AdamW (decoupled weight decay, bias-corrected moments), one fused pass over a tensor.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cmath>

namespace braid::backend::cpu {

template <typename T>
void adamw(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s) {
  const double c1 = 1.0 - std::pow(double(s.beta1), double(s.step));
  const double c2 = 1.0 - std::pow(double(s.beta2), double(s.step));
  const T b1 = T(s.beta1), b2 = T(s.beta2), lr = T(s.lr), wd = T(s.weight_decay), gs = T(s.grad_scale);
  const T inv_c1 = T(1.0 / c1), inv_sqrt_c2 = T(1.0 / std::sqrt(c2)), eps = T(s.eps);
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const T g = grad[i] * gs;
      m[i] = b1 * m[i] + (T(1) - b1) * g;
      v[i] = b2 * v[i] + (T(1) - b2) * g * g;
      const T update = (m[i] * inv_c1) / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
      w[i] -= lr * (update + wd * w[i]);
    }
  });
}

template void adamw<float>(std::int64_t, float*, const float*, float*, float*, const AdamWStep&);
template void adamw<double>(std::int64_t, double*, const double*, double*, double*, const AdamWStep&);

}  // namespace braid::backend::cpu
