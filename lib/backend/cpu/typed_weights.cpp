// The ops whose weights carry their own type (backend::Weights) on the CPU. Weights of the
// op's own type go straight to the plain kernels; bf16 weights are widened on the fly
// (products: panel by panel, cpu/gemm.cpp; embedding rows: row by row; norm gains: once per
// call, they are one row). Activations and accumulation stay in T.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace braid::backend::cpu {
namespace {

[[noreturn]] void unsupported(const char* op, DType have, DType compute) {
  throw std::logic_error(std::string(op) + ": no " + std::string(dtype_name(have)) + " weights in " +
                         std::string(dtype_name(compute)) + " ops on the CPU");
}

const std::uint16_t* bf16_bits(Weights w) { return static_cast<const std::uint16_t*>(w.data); }

// A norm gain (one row of dim) as T: itself, or widened into `keep`.
template <typename T>
const T* row_as(Weights w, std::int64_t dim, std::vector<T>& keep, const char* op) {
  if (w.type == dtype_of<T>()) return static_cast<const T*>(w.data);
  if (w.type != DType::bf16) unsupported(op, w.type, dtype_of<T>());
  keep.resize(std::size_t(dim));
  for (std::int64_t j = 0; j < dim; ++j) keep[std::size_t(j)] = T(bf16_to_float(bf16_bits(w)[j]));
  return keep.data();
}

}  // namespace

template <typename T>
void gemm_weights(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (b.type == dtype_of<T>()) return gemm<T>(ta, tb, m, n, k, alpha, a, lda, static_cast<const T*>(b.data), ldb, beta, c, ldc);
  if (b.type != DType::bf16) unsupported("gemm", b.type, dtype_of<T>());
  gemm_bf16<T>(ta, tb, m, n, k, alpha, a, lda, bf16_bits(b), ldb, beta, c, ldc);
}

template <typename T>
void embedding_forward_weights(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim, T* out) {
  if (table.type == dtype_of<T>()) return embedding_forward<T>(ids, n, static_cast<const T*>(table.data), dim, out);
  if (table.type != DType::bf16) unsupported("embedding_forward", table.type, dtype_of<T>());
  const std::uint16_t* bits = bf16_bits(table);
  parallel_for(n, kParallelMin / dim, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      const std::uint16_t* src = bits + std::int64_t(ids[r]) * dim;
      T* dst = out + r * dim;
      for (std::int64_t j = 0; j < dim; ++j) dst[j] = T(bf16_to_float(src[j]));
    }
  });
}

template <typename T>
void rmsnorm_forward_weights(const T* x, Weights w, const NormShape& s, T* y, T* rstd) {
  std::vector<T> keep;
  rmsnorm_forward<T>(x, row_as<T>(w, s.dim, keep, "rmsnorm_forward"), s, y, rstd);
}

template <typename T>
void rmsnorm_backward_weights(const T* x, Weights w, const T* rstd, const T* dy, const NormShape& s, T* dx, T* dw) {
  std::vector<T> keep;
  rmsnorm_backward<T>(x, row_as<T>(w, s.dim, keep, "rmsnorm_backward"), rstd, dy, s, dx, dw);
}

namespace {

template <typename Src, typename Dst, typename Fn>
void convert_loop(std::int64_t n, const void* src, void* dst, Fn&& fn) {
  const Src* s = static_cast<const Src*>(src);
  Dst* d = static_cast<Dst*>(dst);
  parallel_for(n, kParallelMin, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) d[i] = fn(s[i]);
  });
}

}  // namespace

void convert(std::int64_t n, const void* src, DType st, void* dst, DType dt) {
  using u16 = std::uint16_t;
  if (st == dt) {
    convert_loop<unsigned char, unsigned char>(n * std::int64_t(dtype_size(st)), src, dst, [](unsigned char b) { return b; });
  } else if (st == DType::f32 && dt == DType::bf16) {
    convert_loop<float, u16>(n, src, dst, [](float f) { return float_to_bf16(f); });
  } else if (st == DType::bf16 && dt == DType::f32) {
    convert_loop<u16, float>(n, src, dst, [](u16 h) { return bf16_to_float(h); });
  } else if (st == DType::f32 && dt == DType::f16) {
    convert_loop<float, u16>(n, src, dst, [](float f) { return float_to_f16(f); });
  } else if (st == DType::f16 && dt == DType::f32) {
    convert_loop<u16, float>(n, src, dst, [](u16 h) { return f16_to_float(h); });
  } else if (st == DType::f64 && dt == DType::bf16) {
    convert_loop<double, u16>(n, src, dst, [](double f) { return float_to_bf16(float(f)); });
  } else if (st == DType::bf16 && dt == DType::f64) {
    convert_loop<u16, double>(n, src, dst, [](u16 h) { return double(bf16_to_float(h)); });
  } else {
    throw std::logic_error("convert: no conversion from " + std::string(dtype_name(st)) + " to " +
                           std::string(dtype_name(dt)) + " on the CPU");
  }
}

template void gemm_weights<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                  std::int64_t, Weights, std::int64_t, float, float*, std::int64_t);
template void gemm_weights<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                   std::int64_t, Weights, std::int64_t, double, double*, std::int64_t);
template void embedding_forward_weights<float>(const std::int32_t*, std::int64_t, Weights, std::int64_t, float*);
template void embedding_forward_weights<double>(const std::int32_t*, std::int64_t, Weights, std::int64_t, double*);
template void rmsnorm_forward_weights<float>(const float*, Weights, const NormShape&, float*, float*);
template void rmsnorm_forward_weights<double>(const double*, Weights, const NormShape&, double*, double*);
template void rmsnorm_backward_weights<float>(const float*, Weights, const float*, const float*, const NormShape&,
                                              float*, float*);
template void rmsnorm_backward_weights<double>(const double*, Weights, const double*, const double*, const NormShape&,
                                               double*, double*);

}  // namespace braid::backend::cpu
