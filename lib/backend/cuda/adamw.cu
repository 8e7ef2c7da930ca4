#include "backend/cuda/adamw.cuh"

#include "backend/cuda/check.cuh"

#include <cuda_bf16.h>

#include <cmath>

namespace braid::backend::cuda {
namespace {

struct AdamWConsts {
  float b1, b2, lr, wd, gs, inv_c1, inv_sqrt_c2, eps;
};

// One element's update: the moments, then the weight (the same expressions in every path,
// so the vector and scalar paths agree bit for bit).
__device__ __forceinline__ float adamw_one(float w, float grad, float& m, float& v, const AdamWConsts& c) {
  const float g = grad * c.gs;
  m = c.b1 * m + (1.0f - c.b1) * g;
  v = c.b2 * v + (1.0f - c.b2) * g * g;
  const float update = (m * c.inv_c1) / (sqrtf(v) * c.inv_sqrt_c2 + c.eps);
  return w - c.lr * (update + c.wd * w);
}

// Scalar elements [begin, n); copy (bf16) written when not null.
__global__ void adamw_kernel(std::int64_t begin, std::int64_t n, float* w, const float* grad, float* m, float* v,
                             __nv_bfloat16* copy, AdamWConsts c) {
  for (std::int64_t i = begin + blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float wi = adamw_one(w[i], grad[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    if (copy) copy[i] = __float2bfloat16_rn(wi);
  }
}

// Four elements a thread with 16-byte loads and stores (8 for the bf16 copy): quads
// [0, quads) of arrays aligned to 16 bytes.
__global__ void adamw4_kernel(std::int64_t quads, float4* w, const float4* grad, float4* m, float4* v,
                              __nv_bfloat162* copy, AdamWConsts c) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < quads;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float4 wi = w[i], mi = m[i], vi = v[i];
    const float4 gi = grad[i];
    wi.x = adamw_one(wi.x, gi.x, mi.x, vi.x, c);
    wi.y = adamw_one(wi.y, gi.y, mi.y, vi.y, c);
    wi.z = adamw_one(wi.z, gi.z, mi.z, vi.z, c);
    wi.w = adamw_one(wi.w, gi.w, mi.w, vi.w, c);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    if (copy) {
      copy[2 * i] = __halves2bfloat162(__float2bfloat16_rn(wi.x), __float2bfloat16_rn(wi.y));
      copy[2 * i + 1] = __halves2bfloat162(__float2bfloat16_rn(wi.z), __float2bfloat16_rn(wi.w));
    }
  }
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

void launch(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, __nv_bfloat16* copy,
            const AdamWParams& st) {
  if (n <= 0) return;
  const double c1 = 1.0 - std::pow(double(st.beta1), double(st.step));
  const double c2 = 1.0 - std::pow(double(st.beta2), double(st.step));
  const AdamWConsts c{st.beta1, st.beta2, st.lr, st.weight_decay, st.grad_scale, float(1.0 / c1),
                      float(1.0 / std::sqrt(c2)), st.eps};
  std::int64_t quads = 0;
  if (aligned(w, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) && (!copy || aligned(copy, 8))) {
    quads = n / 4;
    if (quads > 0)
      adamw4_kernel<<<blocks_for(quads, 256), 256, 0, s>>>(
          quads, reinterpret_cast<float4*>(w), reinterpret_cast<const float4*>(grad), reinterpret_cast<float4*>(m),
          reinterpret_cast<float4*>(v), reinterpret_cast<__nv_bfloat162*>(copy), c);
  }
  if (4 * quads < n) adamw_kernel<<<blocks_for(n - 4 * quads, 256), 256, 0, s>>>(4 * quads, n, w, grad, m, v, copy, c);
  check_launch("adamw");
}

}  // namespace

void adamw(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, const AdamWParams& st) {
  launch(s, n, w, grad, m, v, nullptr, st);
}

void adamw_bf16_copy(cudaStream_t s, std::int64_t n, float* w, const float* grad, float* m, float* v, void* copy,
                     const AdamWParams& st) {
  launch(s, n, w, grad, m, v, static_cast<__nv_bfloat16*>(copy), st);
}

}  // namespace braid::backend::cuda
