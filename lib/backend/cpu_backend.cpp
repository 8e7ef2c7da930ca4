// The CPU backend: host memory, OpenBLAS for products, a thread pool for the loops.
// Every op is synchronous, so synchronize() has nothing to wait for and an event is
// complete when it is recorded; streams and events are ids checked against the live ones.
#include "backend/backend.hpp"
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>

#include <sys/mman.h>

namespace braid::backend {
namespace {

template <typename T>
class CpuOps final : public Ops<T> {
 public:
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
            std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) override {
    cpu::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void embedding_forward(const std::int32_t* ids, std::int64_t n, const T* table, std::int64_t dim,
                         T* out) override {
    cpu::embedding_forward<T>(ids, n, table, dim, out);
  }
  void embedding_backward(const std::int32_t* ids, std::int64_t n, const T* d_out, std::int64_t dim,
                          T* d_table) override {
    cpu::embedding_backward<T>(ids, n, d_out, dim, d_table);
  }
  void rmsnorm_forward(const T* x, Weights w, const NormShape& s, T* y, T* rstd) override {
    cpu::rmsnorm_forward_weights<T>(x, w, s, y, rstd);
  }
  void rmsnorm_backward(const T* x, Weights w, const T* rstd, const T* dy, const NormShape& s, T* dx,
                        T* dw) override {
    cpu::rmsnorm_backward_weights<T>(x, w, rstd, dy, s, dx, dw);
  }
  void rope(T* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim, const std::int32_t* pos,
            const T* cos, const T* sin, bool inverse) override {
    cpu::rope<T>(x, n, stride, n_heads, head_dim, pos, cos, sin, inverse);
  }
  void attention_forward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const T* q,
                         const T* k, const T* v, T* out, T* lse) override {
    cpu::attention_forward<T>(dims, segs, q, k, v, out, lse);
  }
  void attention_backward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const T* q,
                          const T* k, const T* v, const T* out, const T* lse, const T* d_out, T* d_q,
                          T* d_k, T* d_v) override {
    cpu::attention_backward<T>(dims, segs, q, k, v, out, lse, d_out, d_q, d_k, d_v);
  }
  void swiglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) override {
    cpu::swiglu_forward<T>(gate_up, n, inter, out);
  }
  void swiglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter,
                       T* d_gate_up) override {
    cpu::swiglu_backward<T>(gate_up, d_out, n, inter, d_gate_up);
  }
  void geglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) override {
    cpu::geglu_forward<T>(gate_up, n, inter, out);
  }
  void geglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter,
                      T* d_gate_up) override {
    cpu::geglu_backward<T>(gate_up, d_out, n, inter, d_gate_up);
  }
  void axpy(std::int64_t n, T alpha, const T* x, T* y) override { cpu::axpy<T>(n, alpha, x, y); }
  void scale(std::int64_t n, T alpha, T* x) override { cpu::scale<T>(n, alpha, x); }
  double sum_squares(std::int64_t n, const T* x) override { return cpu::sum_squares<T>(n, x); }
  void softcap(std::int64_t n, double cap, T* x) override { cpu::softcap<T>(n, cap, x); }
  void softcap_backward(std::int64_t n, double cap, const T* y, T* d) override {
    cpu::softcap_backward<T>(n, cap, y, d);
  }
  void dropout(std::int64_t rows, std::int64_t cols, const T* x, const std::uint64_t* row_keys, std::int64_t col0,
               std::uint64_t seed, double p, T* out) override {
    cpu::dropout<T>(rows, cols, x, row_keys, col0, seed, p, out);
  }
  void softmax_stats(const T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                     T* lse, T* logprob, T* entropy) override {
    cpu::softmax_stats<T>(logits, rows, vocab, targets, lse, logprob, entropy);
  }
  void softmax_stats_backward(T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                              const T* lse, const T* entropy, const T* d_logprob, const T* d_entropy) override {
    cpu::softmax_stats_backward<T>(logits, rows, vocab, targets, lse, entropy, d_logprob, d_entropy);
  }
  void adamw(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s) override {
    cpu::adamw<T>(n, w, grad, m, v, s);
  }
  PolicyLossSums policy_loss(std::int64_t n, const PolicyLossRows<T>& in, const PolicyLossOptions& opt, double scale,
                             T* d_logprob, T* d_entropy) override {
    return cpu::policy_loss<T>(n, in, opt, scale, d_logprob, d_entropy);
  }
  ValueLossSums value_loss(std::int64_t n, const ValueLossRows<T>& in, double clip, double scale,
                           T* d_values) override {
    return cpu::value_loss<T>(n, in, clip, scale, d_values);
  }
  PairwiseLossSums pairwise_loss(std::int64_t pairs, const T* values, const std::int64_t* chosen_rows,
                                 const std::int64_t* rejected_rows, double scale, T* d_values) override {
    return cpu::pairwise_loss<T>(pairs, values, chosen_rows, rejected_rows, scale, d_values);
  }
  double nll_loss(std::int64_t n, const T* logprob, const T* weight, double scale, T* d_logprob) override {
    return cpu::nll_loss<T>(n, logprob, weight, scale, d_logprob);
  }
  DpoLossSums dpo_loss(std::int64_t pairs, const DpoLossRows<T>& in, const DpoLossOptions& opt, double scale,
                       T* d_logprob) override {
    return cpu::dpo_loss<T>(pairs, in, opt, scale, d_logprob);
  }
  WhiteningStats whiten(std::int64_t n, T* x, const std::uint8_t* mask, double eps) override {
    return cpu::whiten<T>(n, x, mask, eps);
  }
  void paged_kv_write(std::int64_t n, const T* k_src, const T* v_src, std::int64_t src_stride,
                      const std::int32_t* slots, const PagedKV& cache) override {
    cpu::paged_kv_write<T>(n, k_src, v_src, src_stride, slots, cache);
  }
  void paged_attention(const AttentionDims& dims, std::int64_t n, const T* q, const PagedKV& cache,
                       const PagedRows& rows, T* out) override {
    cpu::paged_attention<T>(dims, n, q, cache, rows, out);
  }
  void sample(const T* logits, std::int64_t rows, std::int64_t vocab, const SamplingSpec& spec,
              const double* uniforms, std::int32_t* tokens, T* logprob, T* raw_logprob) override {
    cpu::sample<T>(logits, rows, vocab, spec, uniforms, tokens, logprob, raw_logprob);
  }
  double global_sum_squares(std::span<const std::span<const T>> xs) override {
    double s = 0;
    for (const std::span<const T>& x : xs) s += cpu::sum_squares<T>(std::int64_t(x.size()), x.data());
    return s;
  }

  // Typed weight operands (bf16 weights widened on the fly: cpu/typed_weights.cpp).
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
            std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) override {
    cpu::gemm_weights<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void embedding_forward(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim,
                         T* out) override {
    cpu::embedding_forward_weights<T>(ids, n, table, dim, out);
  }
  void convert(std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type) override {
    cpu::convert(n, src, src_type, dst, dst_type);
  }
};

// Handles of the CPU backend: small integers in the pointer.
class Handles {
 public:
  void* make() {
    std::lock_guard lock(mu_);
    const auto id = next_++;
    live_.insert(id);
    return reinterpret_cast<void*>(id);
  }
  void drop(void* h, const char* what) {
    std::lock_guard lock(mu_);
    if (live_.erase(reinterpret_cast<std::uintptr_t>(h)) == 0) throw_unknown(what);
  }
  void check(void* h, const char* what) const {
    std::lock_guard lock(mu_);
    if (live_.count(reinterpret_cast<std::uintptr_t>(h)) == 0) throw_unknown(what);
  }

 private:
  [[noreturn]] static void throw_unknown(const char* what) {
    throw std::logic_error(std::string("cpu backend: not a live ") + what + " of this backend");
  }
  mutable std::mutex mu_;
  std::uintptr_t next_ = 2;
  std::set<std::uintptr_t> live_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : threads_(threads > 0 ? threads : available_cores()) {
    // One pool of threads: braid's. OpenBLAS runs single-threaded inside it (cpu/gemm.cpp).
    openblas_set_num_threads(1);
    cpu::set_pool_threads(threads_);
  }

  std::string name() const override { return "cpu"; }
  int threads() const override { return threads_; }
  // Every op in f32 and f64; bf16 as the type of weights (gemm, embedding, rmsnorm) and
  // of the compute copy AdamW refreshes; f16 not (yet) as weights.
  bool supports(Op op, DType dtype) const override {
    if (dtype == DType::f32 || dtype == DType::f64) return true;
    if (dtype == DType::bf16) {
      return op == Op::gemm || op == Op::embedding || op == Op::rmsnorm || op == Op::adamw || op == Op::paged_attention;
    }
    return false;
  }
  bool host_accessible() const override { return true; }

  void* allocate(std::size_t bytes) override {
    // Large buffers (weights, activations) in transparent huge pages: the first touch
    // of fresh memory then faults once per 2 MiB, not per 4 KiB. On a virtual machine
    // a fault costs microseconds, and a stage tool's first pass over a new activation
    // buffer spent half its time faulting (measured with perf on braid-score).
    constexpr std::size_t kHuge = std::size_t{1} << 21;
    if (bytes >= kHuge) {
      const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
      void* p = std::aligned_alloc(kHuge, rounded);
      if (!p) throw std::bad_alloc();
      ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP it changes nothing
      return p;
    }
    // 64-byte alignment: whole cache lines, and what AVX-512 loads like.
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill_zero(void* dst, std::size_t bytes) override { std::memset(dst, 0, bytes); }
  void synchronize() override {}

  Stream default_stream() const override { return kDefault; }
  Stream create_stream() override { return Stream{streams_.make()}; }
  void destroy_stream(Stream s) override {
    if (s == kDefault) throw std::logic_error("cpu backend: the default stream cannot be destroyed");
    if (s == current_) throw std::logic_error("cpu backend: the current stream cannot be destroyed");
    streams_.drop(s.handle, "stream");
  }
  Stream current_stream() const override { return current_; }
  void set_stream(Stream s) override {
    check(s);
    current_ = s;
  }
  Event create_event() override { return Event{events_.make()}; }
  void destroy_event(Event e) override { events_.drop(e.handle, "event"); }
  void record(Event e, Stream s) override {
    events_.check(e.handle, "event");
    check(s);
  }
  void wait(Stream s, Event e) override {
    check(s);
    events_.check(e.handle, "event");
  }
  bool query(Event e) override {
    events_.check(e.handle, "event");
    return true;
  }
  void synchronize(Event e) override { events_.check(e.handle, "event"); }
  void synchronize(Stream s) override { check(s); }
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    check(s);
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    check(s);
    std::memcpy(dst, src, bytes);
  }

 protected:
  Ops<float>* f32_ops() override { return &f32_; }
  Ops<double>* f64_ops() override { return &f64_; }

 private:
  static inline char default_tag_ = 0;  // its address is the default stream's handle
  static inline const Stream kDefault{&default_tag_};
  void check(Stream s) const {
    if (s != kDefault) streams_.check(s.handle, "stream");
  }

  int threads_;
  Handles streams_, events_;
  Stream current_ = kDefault;
  CpuOps<float> f32_;
  CpuOps<double> f64_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace braid::backend
