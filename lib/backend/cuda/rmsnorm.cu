#include "backend/cuda/rmsnorm.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kChunks = 128;  // partial rows of dw

template <typename W>
__global__ void rmsnorm_forward_kernel(const float* x, const W* w, std::int64_t dim, double eps, float* y, float* rstd) {
  const std::int64_t r = blockIdx.x;
  const float* xr = x + r * dim;
  float ss = 0;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) ss += xr[j] * xr[j];
  ss = block_sum(ss);
  const float s = float(1.0 / sqrt(double(ss) / double(dim) + eps));
  if (threadIdx.x == 0) rstd[r] = s;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) y[r * dim + j] = xr[j] * s * load_as_float(w, j);
}

// dx += rstd · (dy·w − x · rstd² · mean(dy·w·x)): one block per row, as the forward.
template <typename W>
__global__ void rmsnorm_backward_dx_kernel(const float* x, const W* w, const float* rstd, const float* dy,
                                           std::int64_t dim, float* dx) {
  const std::int64_t r = blockIdx.x;
  const float* xr = x + r * dim;
  const float* dyr = dy + r * dim;
  const float s = rstd[r];
  float dot = 0;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) dot += dyr[j] * load_as_float(w, j) * xr[j];
  dot = block_sum(dot);
  const float c = dot / float(dim) * s * s;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) dx[r * dim + j] += s * (dyr[j] * load_as_float(w, j) - xr[j] * c);
}

// dw's partial rows: block (column tile, chunk) sums dy·x·rstd over the chunk's rows for
// its columns, one column per thread (coalesced across the threads), in row order.
__global__ void rmsnorm_backward_dw_kernel(const float* x, const float* rstd, const float* dy, std::int64_t n,
                                           std::int64_t dim, std::int64_t rows_per_chunk, float* partial) {
  const std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (j >= dim) return;
  const std::int64_t lo = blockIdx.y * rows_per_chunk;
  const std::int64_t hi = min(n, lo + rows_per_chunk);
  float acc = 0;
  for (std::int64_t r = lo; r < hi; ++r) acc += dy[r * dim + j] * x[r * dim + j] * rstd[r];
  partial[blockIdx.y * dim + j] = acc;
}

__global__ void sum_partials_kernel(const float* partial, std::int64_t chunks, std::int64_t dim, float* dw) {
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < dim; j += std::int64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (std::int64_t c = 0; c < chunks; ++c) s += partial[c * dim + j];
    dw[j] += s;
  }
}

[[noreturn]] void unsupported(const char* op, DType t) {
  throw std::logic_error(std::string(op) + ": no " + std::string(dtype_name(t)) + " norm weights on CUDA");
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, const float* x, const void* w, DType wt, std::int64_t n, std::int64_t dim,
                     double eps, float* y, float* rstd) {
  if (n <= 0) return;
  if (n > 0x7fffffff) throw std::invalid_argument("rmsnorm_forward: more than 2^31 rows");
  if (wt == DType::f32) rmsnorm_forward_kernel<<<unsigned(n), kThreads, 0, s>>>(x, static_cast<const float*>(w), dim, eps, y, rstd);
  else if (wt == DType::bf16) rmsnorm_forward_kernel<<<unsigned(n), kThreads, 0, s>>>(x, static_cast<const unsigned short*>(w), dim, eps, y, rstd);
  else unsupported("rmsnorm_forward", wt);
  check_launch("rmsnorm_forward");
}

std::int64_t rmsnorm_backward_scratch(std::int64_t n, std::int64_t dim) {
  const std::int64_t per = (n + kChunks - 1) / kChunks;
  return ((n + per - 1) / per) * dim;
}

void rmsnorm_backward(cudaStream_t s, const float* x, const void* w, DType wt, const float* rstd, const float* dy,
                      std::int64_t n, std::int64_t dim, float* dx, float* dw, float* scratch) {
  if (n <= 0) return;
  const std::int64_t per = (n + kChunks - 1) / kChunks;
  const std::int64_t chunks = (n + per - 1) / per;
  if (n > 0x7fffffff) throw std::invalid_argument("rmsnorm_backward: more than 2^31 rows");
  if (wt == DType::f32) {
    rmsnorm_backward_dx_kernel<<<unsigned(n), kThreads, 0, s>>>(x, static_cast<const float*>(w), rstd, dy, dim, dx);
  } else if (wt == DType::bf16) {
    rmsnorm_backward_dx_kernel<<<unsigned(n), kThreads, 0, s>>>(x, static_cast<const unsigned short*>(w), rstd, dy, dim, dx);
  } else {
    unsupported("rmsnorm_backward", wt);
  }
  check_launch("rmsnorm_backward");
  rmsnorm_backward_dw_kernel<<<dim3(blocks_for(dim, kThreads), unsigned(chunks)), kThreads, 0, s>>>(x, rstd, dy, n, dim,
                                                                                                 per, scratch);
  check_launch("rmsnorm_backward (dw partials)");
  sum_partials_kernel<<<blocks_for(dim, kThreads), kThreads, 0, s>>>(scratch, chunks, dim, dw);
  check_launch("rmsnorm_backward (dw)");
}

}  // namespace braid::backend::cuda
