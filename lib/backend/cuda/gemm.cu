#include "backend/cuda/gemm.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/elementwise.cuh"

#include <climits>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw std::invalid_argument(std::string("gemm: ") + what + " out of cuBLAS's int range");
  return int(v);
}

}  // namespace

void check_cublas(cublasStatus_t st, const char* op) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(op, std::string("cuBLAS: ") + cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ")");
}

void gemm_f32(cublasHandle_t h, cudaStream_t s, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
              float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
              std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  check_cublas(cublasSetStream(h, s), "gemm");
  check_cublas(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n, "n"),
                           as_int(m, "m"), as_int(k, "k"), &alpha, b, as_int(ldb, "ldb"), a, as_int(lda, "lda"), &beta,
                           c, as_int(ldc, "ldc")),
               "gemm");
}

void gemm_bf16_weights(cublasHandle_t h, cudaStream_t s, bool ta, bool tb, std::int64_t m, std::int64_t n,
                       std::int64_t k, float alpha, const float* a, std::int64_t lda, const std::uint16_t* b,
                       std::int64_t ldb, float beta, float* c, std::int64_t ldc, std::uint16_t* a_bf16) {
  if (m == 0 || n == 0) return;
  // A as stored: (ta ? k × m : m × k) rows of lda; packed to its own width.
  const std::int64_t rows = ta ? k : m, cols = ta ? m : k;
  pack_bf16(s, rows, cols, a, lda, a_bf16);
  check_cublas(cublasSetStream(h, s), "gemm (bf16 weights)");
  check_cublas(cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n, "n"),
                            as_int(m, "m"), as_int(k, "k"), &alpha, b, CUDA_R_16BF, as_int(ldb, "ldb"), a_bf16,
                            CUDA_R_16BF, as_int(cols > 0 ? cols : 1, "lda"), &beta, c, CUDA_R_32F, as_int(ldc, "ldc"),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm (bf16 weights)");
}

}  // namespace braid::backend::cuda
