// Vector ops of the CUDA backend: y += a·x, x *= a, Σx² (as per-block partial sums that
// the caller adds on the host in block order, so the result does not depend on timing),
// soft-capping (x = c·tanh(x / c) and its backward), inverted dropout, and element type conversion (f32 ↔
// bf16, rounding to nearest even).
#pragma once

#include "backend/dtype.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// Blocks (and so partial sums) of the reductions: enough to fill an H100/H200 twice over.
constexpr int kReduceBlocks = 264;
constexpr int kReduceThreads = 256;

void axpy(cudaStream_t s, std::int64_t n, float alpha, const float* x, float* y);
void scale(cudaStream_t s, std::int64_t n, float alpha, float* x);
// x = cap · tanh(x / cap);  d *= 1 − (y / cap)² (y: the capped values).
void softcap(cudaStream_t s, std::int64_t n, float cap, float* x);
void softcap_backward(cudaStream_t s, std::int64_t n, float cap, const float* y, float* d);
// Inverted dropout (Ops::dropout): out[r, c] = x[r, c] · (1 / (1 − p) as float) where
// dropout_keeps(seed, row_keys[r], col0 + c, p) (backend/dropout_draw.hpp), else 0.
void dropout(cudaStream_t s, std::int64_t rows, std::int64_t cols, const float* x, const std::uint64_t* row_keys,
             std::int64_t col0, std::uint64_t seed, double p, float* out);
// partial[kReduceBlocks] (device) = per-block Σ x² in f64.
void sum_squares_partials(cudaStream_t s, std::int64_t n, const float* x, double* partial);
// dst[i] = src[i] converted; f32, bf16 and f16 either way, or a plain copy when the types match.
void convert(cudaStream_t s, std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type);

}  // namespace braid::backend::cuda
