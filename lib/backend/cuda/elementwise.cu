#include "backend/cuda/elementwise.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/dropout_draw.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

namespace braid::backend::cuda {
namespace {

__global__ void axpy_kernel(std::int64_t n, float alpha, const float* x, float* y) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

__global__ void scale_kernel(std::int64_t n, float alpha, float* x) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] *= alpha;
}

__global__ void softcap_kernel(std::int64_t n, float cap, float* x) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

__global__ void softcap_backward_kernel(std::int64_t n, float cap, const float* y, float* d) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const float t = y[i] / cap;
    d[i] *= 1.0f - t * t;
  }
}

__global__ void dropout_kernel(std::int64_t rows, std::int64_t cols, const float* x, const std::uint64_t* row_keys,
                               std::int64_t col0, std::uint64_t seed, double p, float kept, float* out) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i - r * cols;
    out[i] = dropout_keeps(seed, row_keys[r], col0 + c, p) ? x[i] * kept : 0.0f;
  }
}

__global__ void sum_squares_kernel(std::int64_t n, const float* x, double* partial) {
  double s = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * double(x[i]);
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__device__ float to_float(float v) { return v; }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_float(__half v) { return __half2float(v); }
template <typename D> __device__ D from_float(float v);
template <> __device__ float from_float<float>(float v) { return v; }
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __half from_float<__half>(float v) { return __float2half_rn(v); }

template <typename S, typename D>
__global__ void convert_kernel(std::int64_t n, const S* src, D* dst) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    dst[i] = from_float<D>(to_float(src[i]));
}

constexpr int kThreads = 256;

template <typename S, typename D>
void launch_convert(cudaStream_t s, std::int64_t n, const void* src, void* dst) {
  convert_kernel<S, D><<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, static_cast<const S*>(src), static_cast<D*>(dst));
  check_launch("convert");
}

}  // namespace

void axpy(cudaStream_t s, std::int64_t n, float alpha, const float* x, float* y) {
  if (n <= 0) return;
  axpy_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, alpha, x, y);
  check_launch("axpy");
}

void scale(cudaStream_t s, std::int64_t n, float alpha, float* x) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, alpha, x);
  check_launch("scale");
}

void softcap(cudaStream_t s, std::int64_t n, float cap, float* x) {
  if (n <= 0) return;
  softcap_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, cap, x);
  check_launch("softcap");
}

void softcap_backward(cudaStream_t s, std::int64_t n, float cap, const float* y, float* d) {
  if (n <= 0) return;
  softcap_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, cap, y, d);
  check_launch("softcap_backward");
}

void dropout(cudaStream_t s, std::int64_t rows, std::int64_t cols, const float* x, const std::uint64_t* row_keys,
             std::int64_t col0, std::uint64_t seed, double p, float* out) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  dropout_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(rows, cols, x, row_keys, col0, seed, p,
                                                             float(1.0 / (1.0 - p)), out);
  check_launch("dropout");
}

void sum_squares_partials(cudaStream_t s, std::int64_t n, const float* x, double* partial) {
  sum_squares_kernel<<<kReduceBlocks, kReduceThreads, 0, s>>>(n, x, partial);
  check_launch("sum_squares");
}

void convert(cudaStream_t s, std::int64_t n, const void* src, DType st, void* dst, DType dt) {
  if (n <= 0) return;
  if (st == dt) {
    check(cudaMemcpyAsync(dst, src, std::size_t(n) * dtype_size(st), cudaMemcpyDeviceToDevice, s), "convert");
    return;
  }
  using bf = __nv_bfloat16;
  if (st == DType::f32 && dt == DType::bf16) return launch_convert<float, bf>(s, n, src, dst);
  if (st == DType::bf16 && dt == DType::f32) return launch_convert<bf, float>(s, n, src, dst);
  if (st == DType::f32 && dt == DType::f16) return launch_convert<float, __half>(s, n, src, dst);
  if (st == DType::f16 && dt == DType::f32) return launch_convert<__half, float>(s, n, src, dst);
  throw std::logic_error("convert: no conversion from " + std::string(dtype_name(st)) + " to " +
                         std::string(dtype_name(dt)) + " on CUDA");
}

}  // namespace braid::backend::cuda
