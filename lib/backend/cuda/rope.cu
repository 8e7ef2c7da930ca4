#include "backend/cuda/rope.cuh"

#include "backend/cuda/check.cuh"

namespace braid::backend::cuda {
namespace {

__global__ void rope_kernel(float* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim, int half,
                            const std::int32_t* pos, const float* cos, const float* sin, float sign) {
  const std::int64_t total = n * n_heads * half;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / (std::int64_t(n_heads) * half);
    const int h = int((i / half) % n_heads), j = int(i % half);
    float* xh = x + r * stride + std::int64_t(h) * head_dim;
    const std::int64_t t = std::int64_t(pos[r]) * half + j;
    const float c = cos[t], sj = sign * sin[t];
    const float a = xh[j], b = xh[j + half];
    xh[j] = a * c - b * sj;
    xh[j + half] = b * c + a * sj;
  }
}

}  // namespace

void rope(cudaStream_t s, float* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim,
          const std::int32_t* pos, const float* cos, const float* sin, bool inverse) {
  const int half = head_dim / 2;
  if (n <= 0 || half <= 0) return;
  rope_kernel<<<blocks_for(n * n_heads * half, 256), 256, 0, s>>>(x, n, stride, n_heads, head_dim, half, pos, cos, sin,
                                                                  inverse ? -1.0f : 1.0f);
  check_launch("rope");
}

}  // namespace braid::backend::cuda
