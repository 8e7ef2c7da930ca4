#include "backend/cuda/adamw.cuh"

#include "backend/cuda/check.cuh"

#include <cmath>

namespace braid::backend::cuda {
namespace {

struct AdamWConsts {
  float b1, b2, lr, wd, gs, inv_c1, inv_sqrt_c2, eps;
};

__global__ void adamw_kernel(std::int64_t n, float* w, const float* grad, float* m, float* v, AdamWConsts c) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const float g = grad[i] * c.gs;
    const float mi = c.b1 * m[i] + (1.0f - c.b1) * g;
    const float vi = c.b2 * v[i] + (1.0f - c.b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi * c.inv_c1) / (sqrtf(vi) * c.inv_sqrt_c2 + c.eps);
    w[i] -= c.lr * (update + c.wd * w[i]);
  }
}

}  // namespace

void adamw(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, const AdamWParams& st) {
  if (n <= 0) return;
  const double c1 = 1.0 - std::pow(double(st.beta1), double(st.step));
  const double c2 = 1.0 - std::pow(double(st.beta2), double(st.step));
  const AdamWConsts c{st.beta1, st.beta2, st.lr, st.weight_decay, st.grad_scale, float(1.0 / c1),
                      float(1.0 / std::sqrt(c2)), st.eps};
  adamw_kernel<<<blocks_for(n, 256), 256, 0, s>>>(n, w, grad, m, v, c);
  check_launch("adamw");
}

}  // namespace braid::backend::cuda
