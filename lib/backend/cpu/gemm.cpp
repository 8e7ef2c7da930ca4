// Matrix products go to OpenBLAS, but threaded by the backend's own pool rather than by
// OpenBLAS's: CpuBackend sets OpenBLAS to one thread and each pool thread multiplies a
// block of C. Two pools on the same cores (OpenBLAS's threads busy-waiting while the
// elementwise loops run, and the reverse) made the engine several times slower.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace braid::backend::cpu {
namespace {

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m),
              blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blasint(m),
              blasint(n), blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

// C[1×N] = alpha · a[1×K] · op(B) + beta · C as a matrix-vector product: decode steps of
// one sequence are memory-bound, and gemv streams B once without packing it.
void gemv_row(bool ta, bool tb, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float beta, float* c) {
  const blasint inc = ta ? blasint(lda) : 1;
  if (tb) cblas_sgemv(CblasRowMajor, CblasNoTrans, blasint(n), blasint(k), alpha, b, blasint(ldb), a, inc, beta, c, 1);
  else cblas_sgemv(CblasRowMajor, CblasTrans, blasint(k), blasint(n), alpha, b, blasint(ldb), a, inc, beta, c, 1);
}

void gemv_row(bool ta, bool tb, std::int64_t n, std::int64_t k, double alpha, const double* a, std::int64_t lda,
              const double* b, std::int64_t ldb, double beta, double* c) {
  const blasint inc = ta ? blasint(lda) : 1;
  if (tb) cblas_dgemv(CblasRowMajor, CblasNoTrans, blasint(n), blasint(k), alpha, b, blasint(ldb), a, inc, beta, c, 1);
  else cblas_dgemv(CblasRowMajor, CblasTrans, blasint(k), blasint(n), alpha, b, blasint(ldb), a, inc, beta, c, 1);
}

}  // namespace

template <typename T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int threads = pool().threads();
  // Below ~1 MFLOP the fork/join costs more than it saves.
  if (threads == 1 || double(m) * double(n) * double(k) < 5e5) {
    if (m == 1) gemv_row(ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
    else blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the longer side of C into one block per thread, in multiples of 16 so each
  // block keeps whole SIMD panels.
  const bool split_rows = m >= n;
  const std::int64_t len = split_rows ? m : n;
  const std::int64_t block = std::max<std::int64_t>(16, (len / threads + 15) / 16 * 16);
  const int parts = int((len + block - 1) / block);
  parallel_for(parts, 1, [&](std::int64_t p_lo, std::int64_t p_hi) {
  for (std::int64_t p = p_lo; p < p_hi; ++p) {
    const std::int64_t lo = std::int64_t(p) * block, cnt = std::min(block, len - lo);
    if (m == 1) {
      gemv_row(ta, tb, cnt, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo);
    } else if (split_rows) {
      const T* ap = ta ? a + lo : a + lo * lda;
      blas(ta, tb, cnt, n, k, alpha, ap, lda, b, ldb, beta, c + lo * ldc, ldc);
    } else {
      const T* bp = tb ? b + lo * ldb : b + lo;
      blas(ta, tb, m, cnt, k, alpha, a, lda, bp, ldb, beta, c + lo, ldc);
    }
  }
  });
}

template <typename T>
void gemm_serial(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                 std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// bf16 weights: C's columns in panels, one panel per task; each task widens its panel of B
// (rows of B when trans_b, columns otherwise) into a thread-local scratch of T and runs the
// same BLAS call as the T path on it. Every element of B is widened once per product, a
// cost of n·k beside the product's m·n·k; the scratch of a panel stays in the core's cache.
template <typename T>
void gemm_bf16(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
               std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {   // C = beta · C, as BLAS does
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  // B's block of columns [lo, lo + cnt) of C and of depth [k0, k0 + kc), widened to T in
  // `out` as op(B) would read it (leading dimension: kc when trans_b, cnt otherwise).
  auto widen = [&](std::int64_t lo, std::int64_t cnt, std::int64_t k0, std::int64_t kc, std::vector<T>& out) {
    out.resize(std::size_t(cnt * kc));
    if (tb) {
      for (std::int64_t r = 0; r < cnt; ++r) {
        const std::uint16_t* src = b + (lo + r) * ldb + k0;
        T* dst = out.data() + r * kc;
        for (std::int64_t j = 0; j < kc; ++j) dst[j] = T(bf16_to_float(src[j]));
      }
    } else {
      for (std::int64_t i = 0; i < kc; ++i) {
        const std::uint16_t* src = b + (k0 + i) * ldb + lo;
        T* dst = out.data() + i * cnt;
        for (std::int64_t j = 0; j < cnt; ++j) dst[j] = T(bf16_to_float(src[j]));
      }
    }
  };
  const int threads = pool().threads();
  if (m == 1 && tb) {
    // One row times Wᵀ (a decode step): memory-bound, so W is read once as bf16 and widened
    // in registers, with no scratch. 16 partial sums per row let the loop vectorise.
    const std::int64_t inc = ta ? lda : 1;
    auto rows = [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t j = lo; j < hi; ++j) {
        const std::uint16_t* w = b + j * ldb;
        T acc[16] = {};
        std::int64_t i = 0;
        if (inc == 1) {
          for (; i + 16 <= k; i += 16)
            for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * T(bf16_to_float(w[i + l]));
        }
        double sum = 0;
        for (int l = 0; l < 16; ++l) sum += acc[l];
        for (; i < k; ++i) sum += double(a[i * inc]) * double(bf16_to_float(w[i]));
        c[j] = T(double(alpha) * sum + (beta == T(0) ? 0.0 : double(beta) * double(c[j])));
      }
    };
    if (threads == 1 || double(n) * double(k) < 5e5) rows(0, n);
    else parallel_for(n, std::max<std::int64_t>(16, n / (4 * threads)), rows);
    return;
  }
  if (n <= 64) {
    // A narrow B (the value head): widen all of it and let the T path split C's rows.
    std::vector<T> whole;
    widen(0, n, 0, k, whole);
    gemm<T>(ta, tb, m, n, k, alpha, a, lda, whole.data(), tb ? k : n, beta, c, ldc);
    return;
  }
  // Panels of at most 256 columns, a multiple of the thread count of them, whole SIMD widths.
  const std::int64_t rounds = (n + std::int64_t(threads) * 256 - 1) / (std::int64_t(threads) * 256);
  const std::int64_t parts_wanted = std::int64_t(threads) * rounds;
  const std::int64_t panel = std::max<std::int64_t>(16, ((n + parts_wanted - 1) / parts_wanted + 15) / 16 * 16);
  const std::int64_t parts = (n + panel - 1) / panel;
  // The depth in slices too, so that a panel's scratch stays a few MB however deep the
  // product (the LM head's backward, dlogits · W, runs over the whole vocabulary).
  constexpr std::int64_t kDepth = 2048;
  auto body = [&](std::int64_t p_lo, std::int64_t p_hi) {
    thread_local std::vector<T> scratch;
    for (std::int64_t p = p_lo; p < p_hi; ++p) {
      const std::int64_t lo = p * panel, cnt = std::min(panel, n - lo);
      for (std::int64_t k0 = 0; k0 < k; k0 += kDepth) {
        const std::int64_t kc = std::min(kDepth, k - k0);
        widen(lo, cnt, k0, kc, scratch);
        const std::int64_t ld = tb ? kc : cnt;
        const T* a0 = ta ? a + k0 * lda : a + k0;
        const T beta0 = k0 == 0 ? beta : T(1);   // later slices add to the first's result
        if (m == 1) gemv_row(ta, tb, cnt, kc, alpha, a0, lda, scratch.data(), ld, beta0, c + lo);
        else blas(ta, tb, m, cnt, kc, alpha, a0, lda, scratch.data(), ld, beta0, c + lo, ldc);
      }
    }
  };
  if (threads == 1 || double(m) * double(n) * double(k) < 5e5) body(0, parts);
  else parallel_for(parts, 1, body);
}

template void gemm_bf16<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                               std::int64_t, const std::uint16_t*, std::int64_t, float, float*, std::int64_t);
template void gemm_bf16<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                std::int64_t, const std::uint16_t*, std::int64_t, double, double*, std::int64_t);
template void gemm_serial<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                 std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void gemm_serial<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                  std::int64_t, const double*, std::int64_t, double, double*, std::int64_t);
template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                           std::int64_t, const double*, std::int64_t, double, double*, std::int64_t);

}  // namespace braid::backend::cpu
