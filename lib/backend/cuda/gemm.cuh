// Matrix products on CUDA through cuBLAS, row-major as in Ops::gemm: a row-major C is a
// column-major Cᵀ, so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands
// swapped. f32 products run in plain f32 (CUBLAS_DEFAULT_MATH: no TF32, so results match the
// CPU's to f32 rounding). With B (the weights) stored as bf16, A is rounded to bf16 into
// `a_bf16` (scratch of rows·cols elements) and the product runs on the tensor cores
// (cublasGemmEx, bf16 in, f32 accumulate, f32 C).
#pragma once

#include "backend/dtype.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

void gemm_f32(cublasHandle_t h, cudaStream_t s, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
              std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
              float beta, float* c, std::int64_t ldc);
// Elements of bf16 scratch gemm_bf16_weights needs for A.
inline std::int64_t gemm_bf16_scratch(std::int64_t m, std::int64_t k) { return m * k; }
void gemm_bf16_weights(cublasHandle_t h, cudaStream_t s, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                       std::int64_t k, float alpha, const float* a, std::int64_t lda, const std::uint16_t* b,
                       std::int64_t ldb, float beta, float* c, std::int64_t ldc, std::uint16_t* a_bf16);

// Throws CudaError naming op unless st is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t st, const char* op);

}  // namespace braid::backend::cuda
