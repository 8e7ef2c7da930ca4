// RMSNorm on CUDA (Llama): y = x · rstd · w, rstd = 1/sqrt(mean(x²) + eps), one block per
// row; the gain w stored as f32 or bf16. The backward accumulates dx per row and dw as
// per-chunk partial rows (partial[chunks × dim], scratch of the caller) summed in chunk
// order, so dw does not depend on timing.
#pragma once

#include "backend/dtype.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void rmsnorm_forward(cudaStream_t s, const float* x, const void* w, DType w_type, std::int64_t n, std::int64_t dim,
                     double eps, float* y, float* rstd);
// Rows per chunk of dw's partial sums, and the scratch (floats) the backward needs.
std::int64_t rmsnorm_backward_scratch(std::int64_t n, std::int64_t dim);
void rmsnorm_backward(cudaStream_t s, const float* x, const void* w, DType w_type, const float* rstd, const float* dy,
                      std::int64_t n, std::int64_t dim, float* dx, float* dw, float* scratch);

}  // namespace braid::backend::cuda
