#include "backend/cuda/embedding.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 256;

template <typename W>
__global__ void embedding_forward_kernel(const std::int32_t* ids, std::int64_t n, const W* table, std::int64_t dim,
                                         float* out) {
  const std::int64_t total = n * dim;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / dim, j = i % dim;
    out[i] = load_as_float(table, std::int64_t(ids[r]) * dim + j);
  }
}

__global__ void embedding_backward_kernel(const std::int32_t* ids, std::int64_t n, const float* d_out, std::int64_t dim,
                                          float* d_table) {
  const std::int64_t total = n * dim;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / dim, j = i % dim;
    atomicAdd(d_table + std::int64_t(ids[r]) * dim + j, d_out[i]);
  }
}

}  // namespace

void embedding_forward(cudaStream_t s, const std::int32_t* ids, std::int64_t n, const void* table, DType tt,
                       std::int64_t dim, float* out) {
  if (n <= 0 || dim <= 0) return;
  const unsigned blocks = blocks_for(n * dim, kThreads);
  if (tt == DType::f32) {
    embedding_forward_kernel<<<blocks, kThreads, 0, s>>>(ids, n, static_cast<const float*>(table), dim, out);
  } else if (tt == DType::bf16) {
    embedding_forward_kernel<<<blocks, kThreads, 0, s>>>(ids, n, static_cast<const unsigned short*>(table), dim, out);
  } else {
    throw std::logic_error("embedding_forward: no " + std::string(dtype_name(tt)) + " tables on CUDA");
  }
  check_launch("embedding_forward");
}

void embedding_backward(cudaStream_t s, const std::int32_t* ids, std::int64_t n, const float* d_out, std::int64_t dim,
                        float* d_table) {
  if (n <= 0 || dim <= 0) return;
  embedding_backward_kernel<<<blocks_for(n * dim, kThreads), kThreads, 0, s>>>(ids, n, d_out, dim, d_table);
  check_launch("embedding_backward");
}

}  // namespace braid::backend::cuda
