#include "backend/cuda/gemm.cuh"

#include "backend/cuda/check.cuh"

#include <cuda_bf16.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

namespace braid::backend::cuda {
namespace {

// cuBLASLt's workspace: what NVIDIA recommends for Hopper.
constexpr std::size_t kLtWorkspace = std::size_t{32} << 20;

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw std::invalid_argument(std::string("gemm: ") + what + " out of cuBLAS's int range");
  return int(v);
}

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

// The largest power of two (up to 256) that divides the address: what cuBLASLt may assume.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

__global__ void pack4_kernel(std::int64_t rows, std::int64_t cols4, const float4* __restrict__ src, std::int64_t ld4,
                             uint2* __restrict__ dst) {
  const std::int64_t n = rows * cols4;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols4, c = i - r * cols4;
    const float4 v = src[r * ld4 + c];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 o;
    std::memcpy(&o.x, &lo, 4);
    std::memcpy(&o.y, &hi, 4);
    dst[i] = o;
  }
}

// The same with 32-bit index arithmetic (64-bit division is slow): blocks of fewer than 2³¹ elements.
__global__ void pack4_kernel32(unsigned rows, unsigned cols4, const float4* __restrict__ src, unsigned ld4,
                               uint2* __restrict__ dst) {
  const unsigned n = rows * cols4;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const unsigned r = i / cols4, c = i - r * cols4;
    const float4 v = src[std::size_t(r) * ld4 + c];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 o;
    std::memcpy(&o.x, &lo, 4);
    std::memcpy(&o.y, &hi, 4);
    dst[i] = o;
  }
}

__global__ void pack1_kernel(std::int64_t rows, std::int64_t cols, const float* __restrict__ src, std::int64_t ld,
                             __nv_bfloat16* __restrict__ dst) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    dst[i] = __float2bfloat16_rn(src[r * ld + (i - r * cols)]);
  }
}

unsigned pack_blocks(std::int64_t items) {
  const std::int64_t b = (items + 255) / 256;
  return unsigned(b < 132 * 16 ? (b > 0 ? b : 1) : 132 * 16);  // grid-stride beyond 16 blocks per H200 SM
}

// A stored as the row-major (rows × cols) block op(A) is read from.
struct Stored {
  std::int64_t rows, cols;
};
Stored stored_a(bool ta, std::int64_t m, std::int64_t k) { return ta ? Stored{k, m} : Stored{m, k}; }
Stored stored_b(bool tb, std::int64_t n, std::int64_t k) { return tb ? Stored{n, k} : Stored{k, n}; }

}  // namespace

void check_cublas(cublasStatus_t st, const char* op) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(op, std::string("cuBLAS: ") + cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ")");
}

GemmPath gemm_path_from_env() {
  const char* v = std::getenv("BRAID_CUDA_GEMM");
  if (!v || !*v || std::strcmp(v, "lt") == 0) return GemmPath::lt;
  if (std::strcmp(v, "gemmex") == 0) return GemmPath::gemmex;
  if (std::strcmp(v, "fast16bf") == 0) return GemmPath::fast16bf;
  throw std::invalid_argument(std::string("BRAID_CUDA_GEMM=") + v + ": expected lt, gemmex or fast16bf");
}

void pack_bf16(cudaStream_t s, std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld,
               std::uint16_t* dst) {
  if (rows <= 0 || cols <= 0) return;
  const bool vec = cols % 4 == 0 && ld % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(dst) % 8 == 0;
  if (vec) {
    const std::int64_t cols4 = cols / 4, n4 = rows * cols4;
    if (n4 < (std::int64_t{1} << 31) && ld / 4 < (std::int64_t{1} << 31)) {
      pack4_kernel32<<<pack_blocks(n4), 256, 0, s>>>(unsigned(rows), unsigned(cols4),
                                                     reinterpret_cast<const float4*>(src), unsigned(ld / 4),
                                                     reinterpret_cast<uint2*>(dst));
    } else {
      pack4_kernel<<<pack_blocks(n4), 256, 0, s>>>(rows, cols4, reinterpret_cast<const float4*>(src), ld / 4,
                                                   reinterpret_cast<uint2*>(dst));
    }
  } else {
    pack1_kernel<<<pack_blocks(rows * cols), 256, 0, s>>>(rows, cols, src, ld, reinterpret_cast<__nv_bfloat16*>(dst));
  }
  check_launch("gemm (rounding an operand to bf16)");
}

// ---- cuBLASLt plans ------------------------------------------------------------------
struct Gemm::Plans {
  // A plan: the descriptors of one shape and alignment, and the algorithm found for it.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A (our B), B (our A), C
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
  };
  using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::uint32_t, std::uint32_t, std::uint32_t>;
  std::mutex mu;
  std::map<Key, Plan> plans;

  ~Plans() {
    for (auto& [key, p] : plans) {
      if (p.a) cublasLtMatrixLayoutDestroy(p.a);
      if (p.b) cublasLtMatrixLayoutDestroy(p.b);
      if (p.c) cublasLtMatrixLayoutDestroy(p.c);
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }
  }
};

Gemm::Gemm() : plans_(std::make_unique<Plans>()) {
  check_cublas(cublasCreate(&blas_), "create cuBLAS handle");
  // Plain f32 products (no TF32): results equal the CPU's to f32 rounding.
  check_cublas(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "configure cuBLAS");
  check_cublas(cublasLtCreate(&lt_), "create cuBLASLt handle");
}

Gemm::~Gemm() {
  plans_.reset();
  if (lt_) cublasLtDestroy(lt_);
  if (blas_) cublasDestroy(blas_);
}

void Gemm::f32(cudaStream_t s, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  check_cublas(cublasSetStream(blas_, s), "gemm");
  check_cublas(cublasSgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n, "n"),
                           as_int(m, "m"), as_int(k, "k"), &alpha, b, as_int(ldb, "ldb"), a, as_int(lda, "lda"), &beta,
                           c, as_int(ldc, "ldc")),
               "gemm");
}

std::size_t Gemm::bf16_scratch_bytes(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, DType b_type,
                                     GemmPath path) {
  const Stored sa = stored_a(ta, m, k), sb = stored_b(tb, n, k);
  std::size_t bytes = round_up(kLtWorkspace, 256) + round_up(std::size_t(sa.rows * sa.cols) * 2, 256);
  if (b_type == DType::f32 && path != GemmPath::fast16bf) bytes += round_up(std::size_t(sb.rows * sb.cols) * 2, 256);
  return bytes;
}

void Gemm::bf16(cudaStream_t s, GemmPath path, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                float alpha, const float* a, std::int64_t lda, const void* b, DType b_type, std::int64_t ldb, float beta,
                float* c, std::int64_t ldc, void* scratch, bool a_packed) {
  if (m == 0 || n == 0) return;
  if (b_type != DType::f32 && b_type != DType::bf16) {
    throw std::logic_error("gemm: no " + std::string(dtype_name(b_type)) + " operand on CUDA");
  }
  if (k == 0) {  // C = beta · C: no operand is read
    return f32(s, ta, tb, m, n, 0, alpha, a, lda, static_cast<const float*>(nullptr), ldb, beta, c, ldc);
  }
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (a_packed && path == GemmPath::fast16bf) throw std::logic_error("gemm: a packed A on the fast16bf path");
  if (path == GemmPath::fast16bf && b_type == DType::f32) {
    check_cublas(cublasSetStream(blas_, s), "gemm (fast16bf)");
    check_cublas(cublasGemmEx(blas_, op_b, op_a, as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha, b,
                              CUDA_R_32F, as_int(ldb, "ldb"), a, CUDA_R_32F, as_int(lda, "lda"), &beta, c, CUDA_R_32F,
                              as_int(ldc, "ldc"), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT),
                 "gemm (fast16bf)");
    return;
  }

  // Round the f32 operands into scratch: [workspace][A as bf16][B as bf16].
  auto* base = static_cast<unsigned char*>(scratch);
  void* workspace = base;
  const Stored sa = stored_a(ta, m, k), sb = stored_b(tb, n, k);
  auto* a16 = reinterpret_cast<std::uint16_t*>(base + round_up(kLtWorkspace, 256));
  if (!a_packed) pack_bf16(s, sa.rows, sa.cols, a, lda, a16);
  const std::int64_t lda16 = sa.cols;
  const void* b16 = b;
  std::int64_t ldb16 = ldb;
  if (b_type == DType::f32) {
    auto* p = reinterpret_cast<std::uint16_t*>(reinterpret_cast<unsigned char*>(a16) +
                                               round_up(std::size_t(sa.rows * sa.cols) * 2, 256));
    pack_bf16(s, sb.rows, sb.cols, static_cast<const float*>(b), ldb, p);
    b16 = p;
    ldb16 = sb.cols;
  }

  // The bf16 operands through cublasGemmEx: the gemmex path, and shapes cuBLASLt has no
  // algorithm for.
  auto gemm_ex = [&] {
    check_cublas(cublasSetStream(blas_, s), "gemm (bf16, cublasGemmEx)");
    check_cublas(cublasGemmEx(blas_, op_b, op_a, as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha, b16,
                              CUDA_R_16BF, as_int(ldb16, "ldb"), a16, CUDA_R_16BF, as_int(lda16, "lda"), &beta, c,
                              CUDA_R_32F, as_int(ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "gemm (bf16, cublasGemmEx)");
  };
  if (path == GemmPath::gemmex) {
    gemm_ex();
    return;
  }

  // cuBLASLt, column-major: Cᵀ[n × m] = op_b(B stored) · op_a(A stored), cuBLAS's A = our B.
  const std::uint32_t al_a = alignment_of(b16), al_b = alignment_of(a16), al_c = alignment_of(c);
  const Plans::Key key{ta, tb, m, n, k, ldb16, lda16, ldc, al_a, al_b, al_c};
  Plans::Plan* plan = nullptr;
  {
    std::lock_guard lock(plans_->mu);
    auto [it, fresh] = plans_->plans.try_emplace(key);
    plan = &it->second;
    if (fresh) {
      const char* op = "gemm (bf16, cuBLASLt plan)";
      check_cublas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
      check_cublas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)), op);
      check_cublas(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)), op);
      // Layouts of the matrices as stored (column-major view of our row-major blocks).
      check_cublas(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, std::uint64_t(sb.cols), std::uint64_t(sb.rows),
                                              ldb16),
                   op);
      check_cublas(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, std::uint64_t(sa.cols), std::uint64_t(sa.rows),
                                              lda16),
                   op);
      check_cublas(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, std::uint64_t(n), std::uint64_t(m), ldc), op);
      cublasLtMatmulPreference_t pref = nullptr;
      check_cublas(cublasLtMatmulPreferenceCreate(&pref), op);
      const std::uint64_t ws = kLtWorkspace;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                                               pref, 1, &result, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      plan->found = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      if (plan->found) plan->algo = result.algo;
    }
  }
  if (!plan->found) {  // no cuBLASLt algorithm for this shape: cublasGemmEx takes it
    gemm_ex();
    return;
  }
  check_cublas(cublasLtMatmul(lt_, plan->desc, &alpha, b16, plan->a, a16, plan->b, &beta, c, plan->c, c, plan->c,
                              &plan->algo, workspace, kLtWorkspace, s),
               "gemm (bf16, cuBLASLt)");
}

}  // namespace braid::backend::cuda
