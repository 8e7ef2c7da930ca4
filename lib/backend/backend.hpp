// The one interface the model runs on: device memory, a stream to wait on, and
// the small set of ops a Llama decoder needs (in the manner of ggml's backends).
// The CPU backend (OpenBLAS + its own thread pool) implements every op for float and double;
// double exists so that gradients can be checked by finite differences. A GPU
// backend would implement Ops<float> only and answer supports(op, f64) = false.
//
// Every pointer an op takes is device memory of the backend that runs it. All
// matrices are row-major. Ops run in stream order; synchronize() waits for them.
#pragma once

#include "backend/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace braid::backend {

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }

enum class Op {
  gemm, embedding, rmsnorm, rope, attention, swiglu, elementwise, softmax_stats, adamw,
};

// Attention over a packed batch: rows of q/out are tokens of several segments
// back to back; each segment's keys/values are rows [kv_begin, kv_begin + past + q_len)
// of k/v (the training buffer itself, or a sequence's slot of a KV cache).
// Query i of a segment sits at position past + i and sees keys 0 .. past + i (causal).
struct AttentionSegment {
  std::int64_t q_begin = 0;   // first row of the segment in q, out, lse
  std::int64_t q_len = 0;     // queries in the segment
  std::int64_t kv_begin = 0;  // row of key position 0 in k and v
  std::int64_t past = 0;      // keys before the segment's first query
};

struct AttentionDims {
  int n_heads = 0;
  int n_kv_heads = 0;           // grouped-query attention: n_heads % n_kv_heads == 0
  int head_dim = 0;
  std::int64_t q_stride = 0;    // elements between rows of q (and of d_q)
  std::int64_t kv_stride = 0;   // elements between rows of k, v (and of d_k, d_v)
  // out, d_out rows are n_heads * head_dim wide; lse rows n_heads wide.
};

struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0;
  float grad_scale = 1;         // grads are multiplied by this first (accumulation, clipping)
  std::int64_t step = 1;        // 1-based, for bias correction
};

// ---- Typed operands: mixed precision as a property of the tensor ----------------------
// A read-only operand that carries its element type: the weights an op reads may be stored
// in another type than the op computes in (bf16 weights, f32 activations and accumulation).
// A plain const T* converts to one of type T, so ops that read weights take either.
struct Weights {
  const void* data = nullptr;
  DType type = DType::f32;

  Weights() = default;
  Weights(const void* d, DType t) : data(d), type(t) {}
  Weights(const float* p) : data(p), type(DType::f32) {}     // NOLINT: implicit on purpose
  Weights(const double* p) : data(p), type(DType::f64) {}    // NOLINT: implicit on purpose
  explicit operator bool() const { return data != nullptr; }
};

template <typename T>
class Ops {
 public:
  virtual ~Ops() = default;

  // C[M×N] = alpha · op(A) · op(B) + beta · C  (cblas_?gemm, row-major).
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta,
                    T* c, std::int64_t ldc) = 0;

  // out[i] = table[ids[i]];  d_table[ids[i]] += d_out[i]   (rows of width dim).
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t n, const T* table,
                                 std::int64_t dim, T* out) = 0;
  virtual void embedding_backward(const std::int32_t* ids, std::int64_t n, const T* d_out,
                                  std::int64_t dim, T* d_table) = 0;

  // y = x / rms(x) · w per row; rstd[i] = 1/rms. Backward accumulates into dx and dw.
  virtual void rmsnorm_forward(const T* x, const T* w, std::int64_t n, std::int64_t dim, double eps,
                               T* y, T* rstd) = 0;
  virtual void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, std::int64_t n,
                                std::int64_t dim, T* dx, T* dw) = 0;

  // Rotary embedding in place, Hugging Face Llama convention (rotate_half): for the
  // n_heads heads of each row (row stride `stride`), pairs (j, j + head_dim/2) turn by
  // angle pos · inv_freq[j]; cos/sin tables are [max_pos × head_dim/2]. inverse = true
  // turns back (the backward of the forward rotation).
  virtual void rope(T* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim,
                    const std::int32_t* pos, const T* cos, const T* sin, bool inverse) = 0;

  // Causal grouped-query attention, softmax(q·kᵀ/√d)·v. lse[row × n_heads + h] keeps the
  // log-sum-exp for the backward, which recomputes the probabilities (nothing T×T is kept).
  virtual void attention_forward(const AttentionDims& dims, std::span<const AttentionSegment> segs,
                                 const T* q, const T* k, const T* v, T* out, T* lse) = 0;
  // Writes d_q; accumulates d_k, d_v (key rows as in the forward).
  virtual void attention_backward(const AttentionDims& dims, std::span<const AttentionSegment> segs,
                                  const T* q, const T* k, const T* v, const T* out, const T* lse,
                                  const T* d_out, T* d_q, T* d_k, T* d_v) = 0;

  // gate_up rows are [gate (inter) | up (inter)]; out = silu(gate) · up.
  virtual void swiglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) = 0;
  // Writes d_gate_up.
  virtual void swiglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter,
                               T* d_gate_up) = 0;

  // y += alpha · x;  x *= alpha;  Σ x².
  virtual void axpy(std::int64_t n, T alpha, const T* x, T* y) = 0;
  virtual void scale(std::int64_t n, T alpha, T* x) = 0;
  virtual double sum_squares(std::int64_t n, const T* x) = 0;

  // Per row of logits [rows × vocab]: lse, logprob of targets[i], entropy of softmax.
  virtual void softmax_stats(const T* logits, std::int64_t rows, std::int64_t vocab,
                             const std::int32_t* targets, T* lse, T* logprob, T* entropy) = 0;
  // Turns logits into d_logits in place, for upstream d_logprob and d_entropy (either may be null).
  virtual void softmax_stats_backward(T* logits, std::int64_t rows, std::int64_t vocab,
                                      const std::int32_t* targets, const T* lse, const T* entropy,
                                      const T* d_logprob, const T* d_entropy) = 0;

  // One AdamW update of fp32 master weights w with moments m, v.
  virtual void adamw(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s) = 0;

  // ---- Ops whose weight operand carries its type (see Weights) ----
  // The same products as above with the weights W (B of gemm, the embedding table, the norm
  // gain) stored as w.type; computed and accumulated in T. Where w.type is T's own type they
  // are the plain ops; a backend answers supports(op, bf16) for the others. The defaults
  // here take T only.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                    const T* a, std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim, T* out);
  virtual void rmsnorm_forward(const T* x, Weights w, std::int64_t n, std::int64_t dim, double eps, T* y, T* rstd);
  virtual void rmsnorm_backward(const T* x, Weights w, const T* rstd, const T* dy, std::int64_t n,
                                std::int64_t dim, T* dx, T* dw);
  // dst[i] = src[i] converted from src_type to dst_type (rounding to nearest even when
  // narrowing): a compute copy refreshed from its master, a master widened from its copy.
  virtual void convert(std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type);

 protected:
  // The weights as T, or throws std::logic_error naming the op when they are of another type.
  static const T* same_type(Weights w, const char* op);
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual int threads() const = 0;
  virtual bool supports(Op op, DType dtype) const = 0;
  // Whether device pointers can be read and written by the host directly (CPU: yes).
  virtual bool host_accessible() const = 0;

  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;  // device to device
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  // Waits until every op issued so far has finished.
  virtual void synchronize() = 0;

  // The ops for scalar type T; throws std::logic_error when T is not supported.
  template <typename T> Ops<T>& ops();

 protected:
  virtual Ops<float>* f32_ops() = 0;   // nullptr when unsupported
  virtual Ops<double>* f64_ops() = 0;
};

template <> Ops<float>& Backend::ops<float>();
template <> Ops<double>& Backend::ops<double>();

// The CPU backend. threads <= 0: the cores available to this process. Sets OpenBLAS's
// thread count to 1 (the backend threads products itself); a process-wide setting.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

// An owning device buffer of n elements of T, zero-filled.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& be, std::size_t n) : be_(&be), n_(n) {
    if (n_ > 0) {
      p_ = static_cast<T*>(be.allocate(n_ * sizeof(T)));
      be.fill_zero(p_, n_ * sizeof(T));
    }
  }
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : be_(o.be_), p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) { reset(); be_ = o.be_; p_ = o.p_; n_ = o.n_; o.p_ = nullptr; o.n_ = 0; }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() noexcept { return p_; }
  const T* data() const noexcept { return p_; }
  std::size_t size() const noexcept { return n_; }
  void zero() { if (n_ > 0) be_->fill_zero(p_, n_ * sizeof(T)); }
  void reset() noexcept { if (p_) be_->deallocate(p_); p_ = nullptr; n_ = 0; }

 private:
  Backend* be_ = nullptr;
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace braid::backend
