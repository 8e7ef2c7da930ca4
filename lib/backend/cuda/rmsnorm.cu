#include "backend/cuda/rmsnorm.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kChunks = 128;  // partial rows of dw

// Where vector v (row v / groups, group v % groups) starts.
__device__ __forceinline__ std::int64_t vector_at(const NormRows& s, std::int64_t v) {
  return (v / s.groups) * s.stride + (v % s.groups) * s.dim;
}

template <typename W>
__global__ void rmsnorm_forward_kernel(const float* x, const W* w, NormRows sh, float* y, float* rstd) {
  const std::int64_t v = blockIdx.x;
  const std::int64_t at = vector_at(sh, v);
  const float* xr = x + at;
  const float off = float(sh.weight_offset);
  float ss = 0;
  for (std::int64_t j = threadIdx.x; j < sh.dim; j += blockDim.x) ss += xr[j] * xr[j];
  ss = block_sum(ss);
  const float s = float(1.0 / sqrt(double(ss) / double(sh.dim) + sh.eps));
  if (threadIdx.x == 0) rstd[v] = s;
  // Each thread reads and writes its own elements: y may be x.
  for (std::int64_t j = threadIdx.x; j < sh.dim; j += blockDim.x) y[at + j] = xr[j] * s * (load_as_float(w, j) + off);
}

// dx (+)= rstd · (dy·g − x · rstd² · mean(dy·g·x)), g = w + offset: one block per vector.
template <typename W>
__global__ void rmsnorm_backward_dx_kernel(const float* x, const W* w, const float* rstd, const float* dy, NormRows sh,
                                           float* dx) {
  const std::int64_t v = blockIdx.x;
  const std::int64_t at = vector_at(sh, v);
  const float* xr = x + at;
  const float* dyr = dy + at;
  const float off = float(sh.weight_offset);
  const float s = rstd[v];
  float dot = 0;
  for (std::int64_t j = threadIdx.x; j < sh.dim; j += blockDim.x) dot += dyr[j] * (load_as_float(w, j) + off) * xr[j];
  dot = block_sum(dot);  // every dy of the vector read before any dx is written (dx may be dy)
  const float c = dot / float(sh.dim) * s * s;
  for (std::int64_t j = threadIdx.x; j < sh.dim; j += blockDim.x) {
    const float g = s * (dyr[j] * (load_as_float(w, j) + off) - xr[j] * c);
    dx[at + j] = sh.accumulate ? dx[at + j] + g : g;
  }
}

// dw's partial rows: block (column tile, chunk) sums dy·x·rstd over the chunk's vectors for
// its columns, one column per thread (coalesced across the threads), in vector order.
__global__ void rmsnorm_backward_dw_kernel(const float* x, const float* rstd, const float* dy, NormRows sh,
                                           std::int64_t vectors, std::int64_t per_chunk, float* partial) {
  const std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (j >= sh.dim) return;
  const std::int64_t lo = blockIdx.y * per_chunk;
  const std::int64_t hi = min(vectors, lo + per_chunk);
  float acc = 0;
  for (std::int64_t v = lo; v < hi; ++v) {
    const std::int64_t at = vector_at(sh, v);
    acc += dy[at + j] * x[at + j] * rstd[v];
  }
  partial[blockIdx.y * sh.dim + j] = acc;
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

std::int64_t vectors_of(const NormRows& s, const char* op) {
  const std::int64_t v = s.rows * s.groups;
  if (v > 0x7fffffff) throw std::invalid_argument(std::string(op) + ": more than 2^31 vectors");
  return v;
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, const float* x, const void* w, DType wt, const NormRows& sh, float* y,
                     float* rstd) {
  const std::int64_t v = vectors_of(sh, "rmsnorm_forward");
  if (v <= 0) return;
  if (wt == DType::f32) rmsnorm_forward_kernel<<<unsigned(v), kThreads, 0, s>>>(x, static_cast<const float*>(w), sh, y, rstd);
  else if (wt == DType::bf16) rmsnorm_forward_kernel<<<unsigned(v), kThreads, 0, s>>>(x, static_cast<const unsigned short*>(w), sh, y, rstd);
  else unsupported("rmsnorm_forward", wt);
  check_launch("rmsnorm_forward");
}

std::int64_t rmsnorm_backward_scratch(std::int64_t vectors, std::int64_t dim) {
  const std::int64_t per = (vectors + kChunks - 1) / kChunks;
  return ((vectors + per - 1) / per) * dim;
}

void rmsnorm_backward(cudaStream_t s, const float* x, const void* w, DType wt, const float* rstd, const float* dy,
                      const NormRows& sh, float* dx, float* dw, float* scratch) {
  const std::int64_t v = vectors_of(sh, "rmsnorm_backward");
  if (v <= 0) return;
  const std::int64_t per = (v + kChunks - 1) / kChunks;
  const std::int64_t chunks = (v + per - 1) / per;
  // dw's partials first: they read dy, which dx may overwrite.
  rmsnorm_backward_dw_kernel<<<dim3(blocks_for(sh.dim, kThreads), unsigned(chunks)), kThreads, 0, s>>>(x, rstd, dy, sh,
                                                                                                    v, per, scratch);
  check_launch("rmsnorm_backward (dw partials)");
  if (wt == DType::f32) {
    rmsnorm_backward_dx_kernel<<<unsigned(v), kThreads, 0, s>>>(x, static_cast<const float*>(w), rstd, dy, sh, dx);
  } else if (wt == DType::bf16) {
    rmsnorm_backward_dx_kernel<<<unsigned(v), kThreads, 0, s>>>(x, static_cast<const unsigned short*>(w), rstd, dy, sh, dx);
  } else {
    unsupported("rmsnorm_backward", wt);
  }
  check_launch("rmsnorm_backward");
  sum_partials_kernel<<<blocks_for(sh.dim, kThreads), kThreads, 0, s>>>(scratch, chunks, sh.dim, dw);
  check_launch("rmsnorm_backward (dw)");
}

}  // namespace braid::backend::cuda
