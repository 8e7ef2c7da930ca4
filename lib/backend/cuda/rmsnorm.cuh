// RMSNorm on CUDA (Llama): y = x · rstd · (w + offset), rstd = 1/sqrt(mean(x²) + eps), one
// block per normalised vector (a row, or one head of a row: backend::NormShape); the gain w
// stored as f32 or bf16. The backward writes or accumulates dx per vector and sums dw as
// per-chunk partial rows (partial[chunks × dim], scratch of the caller) in chunk order, so
// dw does not depend on timing. dx may be dy (the dw partials are read first).
#pragma once

#include "backend/dtype.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// backend::NormShape, which the kernels' C++17 cannot include.
struct NormRows {
  std::int64_t rows, dim;
  int groups;
  std::int64_t stride;  // elements between rows (groups · dim when packed)
  double eps, weight_offset;
  bool accumulate;
};

void rmsnorm_forward(cudaStream_t s, const float* x, const void* w, DType w_type, const NormRows& shape, float* y,
                     float* rstd);
// The scratch (floats) the backward needs.
std::int64_t rmsnorm_backward_scratch(std::int64_t vectors, std::int64_t dim);
void rmsnorm_backward(cudaStream_t s, const float* x, const void* w, DType w_type, const float* rstd, const float* dy,
                      const NormRows& shape, float* dx, float* dw, float* scratch);

}  // namespace braid::backend::cuda
