// Matrix products on CUDA, row-major as in Ops::gemm: a row-major C is a column-major Cᵀ,
// so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped.
//
// Two precisions (Backend::product_precision decides which the backend asks for):
//   * exact: f32 operands multiplied in plain f32 (cublasSgemm, CUBLAS_DEFAULT_MATH: no
//     TF32), so results match the CPU's to f32 rounding;
//   * bf16: operands in bf16 on the tensor cores, f32 accumulation, f32 C (beta · C added in
//     f32: the residual add of a layer stays fused in the product). An f32 operand is rounded
//     to bf16 first (a vectorised pack into scratch); bf16 weights are read as they are.
//     cuBLASLt runs it, with the algorithm its heuristic picks cached per shape and alignment.
//
// BRAID_CUDA_GEMM chooses how bf16 products run, so that a GPU session can compare them and
// fall back when one fails: "lt" (the default: pack, cuBLASLt), "gemmex" (pack,
// cublasGemmEx: the path before cuBLASLt), "fast16bf" (two f32 operands go to
// cublasGemmEx unpacked with CUBLAS_COMPUTE_32F_FAST_16BF, cuBLAS rounding them inside the
// kernel; bf16 weights as "lt").
//
// No cuBLASLt epilogue is used: a Llama block has no bias and no GELU, and its one
// product-adjacent elementwise step, the residual add, is already fused as beta = 1 with C
// the residual stream. (Writing C as bf16 would be the next fusion; the activations are f32.)
#pragma once

#include "backend/dtype.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace braid::backend::cuda {

enum class GemmPath { lt, gemmex, fast16bf };

// BRAID_CUDA_GEMM, read when called: unset or "lt", "gemmex", "fast16bf"; std::invalid_argument
// naming the variable otherwise.
GemmPath gemm_path_from_env();

// Throws CudaError naming op unless st is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t st, const char* op);

// One device's product machinery: a cuBLAS handle, a cuBLASLt handle and the cached
// cuBLASLt plans. Not thread-safe beyond what the backend's single caller needs (a mutex
// guards the plan cache).
class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // C = alpha · op(A) · op(B) + beta · C in plain f32.
  void f32(cudaStream_t s, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

  // The same on tensor cores: A is f32 (rounded to bf16), B is f32 (rounded) or bf16
  // (b_type), C f32. scratch: at least bf16_scratch_bytes(...) bytes of device memory,
  // 256-byte aligned, free for this call on stream s. a_packed: the scratch already holds A
  // rounded, as the previous call on this scratch left it (the same A, stored the same way:
  // the two products of a linear backward share d_y); the lt and gemmex paths only.
  static std::size_t bf16_scratch_bytes(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                                        DType b_type, GemmPath path);
  void bf16(cudaStream_t s, GemmPath path, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
            std::int64_t k, float alpha, const float* a, std::int64_t lda, const void* b, DType b_type,
            std::int64_t ldb, float beta, float* c, std::int64_t ldc, void* scratch, bool a_packed = false);

 private:
  struct Plans;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::unique_ptr<Plans> plans_;
};

// A rows × cols block of f32 (row stride ld) rounded to nearest-even bf16 into packed rows
// (row stride cols); four elements a thread where the rows allow it.
void pack_bf16(cudaStream_t s, std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld,
               std::uint16_t* dst);

}  // namespace braid::backend::cuda
