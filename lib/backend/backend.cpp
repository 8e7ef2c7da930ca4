#include "backend/backend.hpp"

#include <sched.h>

#include <stdexcept>
#include <string>

namespace braid::backend {

template <>
Ops<float>& Backend::ops<float>() {
  if (Ops<float>* o = f32_ops()) return *o;
  throw std::logic_error("backend " + name() + " has no float32 ops");
}

template <>
Ops<double>& Backend::ops<double>() {
  if (Ops<double>* o = f64_ops()) return *o;
  throw std::logic_error("backend " + name() + " has no float64 ops");
}

template <typename T>
const T* Ops<T>::same_type(Weights w, const char* op) {
  if (w.type != dtype_of<T>()) {
    throw std::logic_error(std::string(op) + ": this backend takes no " + std::string(dtype_name(w.type)) +
                           " weights in " + std::string(dtype_name(dtype_of<T>())) + " ops");
  }
  return static_cast<const T*>(w.data);
}

template <typename T>
void Ops<T>::gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  gemm(ta, tb, m, n, k, alpha, a, lda, same_type(b, "gemm"), ldb, beta, c, ldc);
}

template <typename T>
void Ops<T>::embedding_forward(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim, T* out) {
  embedding_forward(ids, n, same_type(table, "embedding_forward"), dim, out);
}

template <typename T>
void Ops<T>::linear_backward(std::int64_t n, std::int64_t out, std::int64_t in, const T* d_y, Weights w, const T* x,
                             T beta_x, T* d_x, T* d_w) {
  gemm(false, false, n, in, out, T(1), d_y, out, w, in, beta_x, d_x, in);
  gemm(true, false, out, in, n, T(1), d_y, out, x, in, T(1), d_w, in);
}

template <typename T>
void Ops<T>::convert(std::int64_t, const void*, DType src_type, void*, DType dst_type) {
  throw std::logic_error("convert: this backend does not convert " + std::string(dtype_name(src_type)) + " to " +
                         std::string(dtype_name(dst_type)));
}

template <typename T>
void Ops<T>::adamw_with_copy(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s, void* copy,
                             DType copy_type) {
  adamw(n, w, grad, m, v, s);
  convert(n, w, dtype_of<T>(), copy, copy_type);
}

template class Ops<float>;
template class Ops<double>;

void Backend::begin_capture(Stream) { throw std::logic_error("backend " + name() + " has no graphs"); }
Graph Backend::end_capture(Stream) { throw std::logic_error("backend " + name() + " has no graphs"); }
void Backend::launch(Graph, Stream) { throw std::logic_error("backend " + name() + " has no graphs"); }
void Backend::destroy_graph(Graph) noexcept {}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

}  // namespace braid::backend
