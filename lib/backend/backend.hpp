// The one interface the model runs on: device memory, streams and events to order
// work, and the small set of ops the decoders need (in the manner of ggml's backends).
// The CPU backend (OpenBLAS + its own thread pool) implements every op for float and double;
// double exists so that gradients can be checked by finite differences. A GPU
// backend would implement Ops<float> only and answer supports(op, f64) = false.
//
// Every pointer an op takes is device memory of the backend that runs it, unless its
// comment says host. All matrices are row-major.
//
// Streams and events (the CUDA model; cudaStream_t / cudaEvent_t on a GPU):
//   * A backend has a default stream and may create more. Ops, copy(), fill_zero() and
//     the *_async copies run on the backend's current stream (default_stream() unless
//     set_stream() or a StreamScope chose another), in the order they were issued there.
//     Work on different streams is unordered unless an event orders it.
//   * record(event, stream) marks the point of the stream's work issued so far;
//     wait(stream, event) makes later work on `stream` wait for that point without
//     blocking the host; synchronize(event) / synchronize(stream) block the host until
//     the point / all work of the stream is done; synchronize() waits for every stream.
//   * copy_to_device() / copy_to_host() are synchronous (they return when the bytes are
//     there); copy_*_async(..., stream) return at once, and the host buffer must stay
//     untouched until the stream has passed the copy (synchronize or an event).
//   * Ops that return a value to the host (sum_squares, global_sum_squares) synchronize
//     the current stream first.
//   * On the CPU every op runs synchronously on the calling thread, so an event is
//     complete the moment it is recorded and waiting costs nothing; the calls still check
//     that their handles belong to the backend, so misuse fails here as on a GPU.
#pragma once

#include "backend/dtype.hpp"
#include "backend/losses.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace braid::backend {

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }

enum class Op {
  gemm, embedding, rmsnorm, rope, attention, swiglu, elementwise, softmax_stats, adamw, losses,
  sample, global_sum_squares,
  paged_attention,  // paged_kv_write and paged_attention (dtype: the cache's)
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
  // The score of query q and key k is s = scale · q·k (scale 0: 1/√head_dim), then, with
  // softcap > 0, softcap · tanh(s / softcap) (Gemma 2). window > 0: a query at position p
  // sees only the keys at positions p − window < j <= p (sliding-window attention).
  double scale = 0;
  double softcap = 0;
  std::int64_t window = 0;
  double score_scale() const { return scale > 0 ? scale : 1.0 / std::sqrt(double(head_dim)); }
  // The first key position a query at position p sees.
  std::int64_t first_key(std::int64_t p) const { return window > 0 && p >= window ? p - window + 1 : 0; }
};

// The rows an RMSNorm normalises: `rows` rows of `groups` vectors of `dim` elements (a row's
// vectors adjacent, rows `stride` elements apart; the heads of q in a fused q|k|v row are
// groups of one row), each vector y = x / rms(x) · (w + weight_offset), rstd[row · groups +
// group] = 1 / rms. The gain w has dim elements, shared by every vector.
struct NormShape {
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  int groups = 1;
  std::int64_t stride = 0;       // 0: groups · dim
  double eps = 1e-6;
  double weight_offset = 0;      // Gemma's RMSNorm: (1 + w)
  bool accumulate = true;        // backward: dx += the gradient; false: dx = it (dx may be dy)
  std::int64_t row_stride() const { return stride > 0 ? stride : std::int64_t(groups) * dim; }
};

// One layer of a paged KV cache (docs/engine-io.md): keys and values live in fixed-size
// blocks of block_size token rows; a sequence's block table lists its blocks in order, so
// its key at position p is row p % block_size of block table[p / block_size]. A cache row
// (block · block_size + offset) holds `row` elements (n_kv_heads · head_dim) of `dtype`
// (the ops' T, or bf16: half the memory and the bandwidth of decode attention).
struct PagedKV {
  void* k = nullptr;            // [blocks × block_size × row]
  void* v = nullptr;
  DType dtype = DType::f32;
  int block_size = 16;
  std::int64_t row = 0;
};

// The rows of one paged_attention call (device memory, except max_context and max_blocks).
// Query row i belongs to the sequence whose block table is row row_seq[i] of block_tables
// [sequences × max_blocks] and sees that sequence's keys 0 .. row_ctx[i] − 1 (causal: a
// query at position p has row_ctx = p + 1). row_ctx[i] <= 0: the row is skipped, its
// output left as it was (padding, or rows attended elsewhere).
struct PagedRows {
  const std::int32_t* block_tables = nullptr;
  int max_blocks = 0;
  const std::int32_t* row_seq = nullptr;
  const std::int32_t* row_ctx = nullptr;
  std::int64_t max_context = 0;  // host: no row_ctx exceeds it (how a GPU splits the keys)
};

struct AdamWStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0;
  float grad_scale = 1;         // grads are multiplied by this first (accumulation, clipping)
  std::int64_t step = 1;        // 1-based, for bias correction
};

// The distribution sample() draws from: softmax(logits / temperature), cut to the top_k
// most likely tokens (0: all), then to the smallest most-likely set whose mass reaches
// top_p (1: all), renormalised. temperature <= 0 or top_k == 1 is greedy.
struct SamplingSpec {
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  bool greedy() const { return temperature <= 0.0 || top_k == 1; }
};

// A backend's stream or event: an opaque handle (cudaStream_t / cudaEvent_t on CUDA).
// Only the backend that made one may use it.
struct Stream {
  void* handle = nullptr;
  friend bool operator==(Stream, Stream) = default;
};
struct Event {
  void* handle = nullptr;
  friend bool operator==(Event, Event) = default;
};
// Work captured from a stream and replayed as one launch (a CUDA graph).
struct Graph {
  void* handle = nullptr;
  friend bool operator==(Graph, Graph) = default;
};

// A device's memory as its driver reports it, in bytes.
struct DeviceMemory {
  std::size_t free = 0;
  std::size_t total = 0;
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

  // RMSNorm of the rows NormShape describes, with the gain w stored as w.type (a backend
  // answers supports(rmsnorm, bf16)). y may be x. Backward: dw += Σ dy·x̂ over every vector;
  // dx += (or = , see NormShape::accumulate) the input gradient.
  virtual void rmsnorm_forward(const T* x, Weights w, const NormShape& s, T* y, T* rstd) = 0;
  virtual void rmsnorm_backward(const T* x, Weights w, const T* rstd, const T* dy, const NormShape& s, T* dx,
                                T* dw) = 0;
  // The plain case: y = x / rms(x) · w per row of dim; rstd[i] = 1/rms. Backward
  // accumulates into dx and dw.
  void rmsnorm_forward(const T* x, Weights w, std::int64_t n, std::int64_t dim, double eps, T* y, T* rstd) {
    rmsnorm_forward(x, w, NormShape{.rows = n, .dim = dim, .eps = eps}, y, rstd);
  }
  void rmsnorm_backward(const T* x, Weights w, const T* rstd, const T* dy, std::int64_t n, std::int64_t dim, T* dx,
                        T* dw) {
    rmsnorm_backward(x, w, rstd, dy, NormShape{.rows = n, .dim = dim}, dx, dw);
  }

  // Rotary embedding in place, Hugging Face Llama convention (rotate_half): for the
  // n_heads heads of each row (row stride `stride`), pairs (j, j + head_dim/2) turn by
  // angle pos · inv_freq[j]; cos/sin tables are [max_pos × head_dim/2]. inverse = true
  // turns back (the backward of the forward rotation).
  virtual void rope(T* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim,
                    const std::int32_t* pos, const T* cos, const T* sin, bool inverse) = 0;

  // Causal grouped-query attention, softmax(scores)·v with the scores of AttentionDims
  // (q·kᵀ/√d unless it says otherwise). lse[row × n_heads + h] keeps the log-sum-exp for the
  // backward, which recomputes the probabilities (nothing T×T is kept).
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
  // GeGLU (Gemma): out = gelu_tanh(gate) · up, gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
  // (PyTorch's gelu(approximate="tanh")). Same layout as swiglu; backward writes d_gate_up.
  virtual void geglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out) = 0;
  virtual void geglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter,
                              T* d_gate_up) = 0;

  // y += alpha · x;  x *= alpha;  Σ x².
  virtual void axpy(std::int64_t n, T alpha, const T* x, T* y) = 0;
  virtual void scale(std::int64_t n, T alpha, T* x) = 0;
  virtual double sum_squares(std::int64_t n, const T* x) = 0;
  // Soft-capping in place (Gemma's final logits): x = cap · tanh(x / cap). Its backward turns
  // d (the gradient of the capped values y) into the gradient of x: d *= 1 − (y / cap)².
  virtual void softcap(std::int64_t n, double cap, T* x) = 0;
  virtual void softcap_backward(std::int64_t n, double cap, const T* y, T* d) = 0;
  // Inverted dropout (LoRA's, on the adapters' input): out[r, c] = x[r, c] · (1 / (1 − p)
  // rounded to T) where backend/dropout_draw.hpp's dropout_keeps(seed, row_keys[r], col0 + c,
  // p), else 0, for row-major x and out of [rows × cols] (they may alias); row_keys (device
  // memory) holds one key per row. Every backend keeps the same elements.
  virtual void dropout(std::int64_t rows, std::int64_t cols, const T* x, const std::uint64_t* row_keys,
                       std::int64_t col0, std::uint64_t seed, double p, T* out) = 0;

  // Per row of logits [rows × vocab]: lse, logprob of targets[i], entropy of softmax.
  virtual void softmax_stats(const T* logits, std::int64_t rows, std::int64_t vocab,
                             const std::int32_t* targets, T* lse, T* logprob, T* entropy) = 0;
  // Turns logits into d_logits in place, for upstream d_logprob and d_entropy (either may be null).
  virtual void softmax_stats_backward(T* logits, std::int64_t rows, std::int64_t vocab,
                                      const std::int32_t* targets, const T* lse, const T* entropy,
                                      const T* d_logprob, const T* d_entropy) = 0;

  // One AdamW update of fp32 master weights w with moments m, v.
  virtual void adamw(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s) = 0;

  // The RL losses over n rows of device arrays (backend/losses.hpp): each writes the
  // gradients of scale · loss and returns its weighted sums to the host (a few scalars:
  // the only thing that crosses). policy_loss writes d_entropy only when entropy_coef != 0.
  virtual PolicyLossSums policy_loss(std::int64_t n, const PolicyLossRows<T>& in, const PolicyLossOptions& opt,
                                     double scale, T* d_logprob, T* d_entropy) = 0;
  virtual ValueLossSums value_loss(std::int64_t n, const ValueLossRows<T>& in, double clip, double scale,
                                   T* d_values) = 0;
  // Pair i compares values[chosen_rows[i]] with values[rejected_rows[i]] (row indices in
  // device memory); writes d_values at those rows only.
  virtual PairwiseLossSums pairwise_loss(std::int64_t pairs, const T* values, const std::int64_t* chosen_rows,
                                         const std::int64_t* rejected_rows, double scale, T* d_values) = 0;
  // Σ −weight·logprob; d_logprob = −scale · weight.
  virtual double nll_loss(std::int64_t n, const T* logprob, const T* weight, double scale, T* d_logprob) = 0;
  // DPO over `pairs` pairs of sequences (backend/losses.hpp); writes d_logprob (scale ·
  // ∂loss/∂logprob) on every row of the pairs' sequences, 0 where weight is 0.
  // std::invalid_argument when beta <= 0.
  virtual DpoLossSums dpo_loss(std::int64_t pairs, const DpoLossRows<T>& in, const DpoLossOptions& opt, double scale,
                               T* d_logprob) = 0;
  // In place over the rows with mask[i] != 0 (backend/losses.hpp); the stats to the host.
  virtual WhiteningStats whiten(std::int64_t n, T* x, const std::uint8_t* mask, double eps) = 0;

  // ---- the paged KV cache (PagedKV) ----------------------------------------------------
  // Writes n new key and value rows (k_src, v_src: rows of src_stride elements, row
  // elements used) into cache rows slots[i] (block · block_size + offset, device memory),
  // converted to the cache's dtype; slots[i] < 0 skips row i.
  virtual void paged_kv_write(std::int64_t n, const T* k_src, const T* v_src, std::int64_t src_stride,
                              const std::int32_t* slots, const PagedKV& cache) = 0;
  // Grouped-query attention of n query rows (q rows of dims.q_stride) over the paged cache,
  // softmax(q·kᵀ/√d)·v per head, rows as PagedRows says; out rows n_heads · head_dim wide.
  // dims.kv_stride is ignored (the cache's row is). The decode step's attention; on a GPU
  // the keys of long contexts are split over several blocks of threads and recombined.
  virtual void paged_attention(const AttentionDims& dims, std::int64_t n, const T* q, const PagedKV& cache,
                               const PagedRows& rows, T* out) = 0;

  // ---- sampling and reductions over many tensors -------------------------------------
  // Per row i of logits [rows × vocab]: the token drawn from spec's distribution with the
  // caller's uniform draw uniforms[i] ∈ [0, 1) (ignored when greedy: the argmax). Ties
  // (equal logits) go to the lowest id. logprob[i]: the token's log-probability under
  // the sampled distribution (0 when greedy); raw_logprob[i]: under softmax(logits) at
  // temperature 1, untruncated. The result depends only on the row and its draw, so
  // per-row seeded streams make generation reproducible however rows are batched.
  virtual void sample(const T* logits, std::int64_t rows, std::int64_t vocab, const SamplingSpec& spec,
                      const double* uniforms, std::int32_t* tokens, T* logprob, T* raw_logprob) = 0;
  // Σ x² over every element of every span (device memory; the list is host memory), in
  // f64, the spans added in order: the global gradient norm's square, returned to the host.
  virtual double global_sum_squares(std::span<const std::span<const T>> xs) = 0;

  // ---- Ops whose weight operand carries its type (see Weights) ----
  // The same products as above with the weights W (B of gemm, the embedding table) stored as
  // w.type; computed and accumulated in T. Where w.type is T's own type they
  // are the plain ops; a backend answers supports(op, bf16) for the others. The defaults
  // here take T only.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                    const T* a, std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
  virtual void embedding_forward(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim, T* out);
  // The two products of a linear layer's backward, for y[n × out] = x[n × in] · Wᵀ with W
  // [out × in] (every operand compact: row strides out or in):
  //   d_x  = d_y · W + beta_x · d_x     [n × in]
  //   d_w += d_yᵀ · x                   [out × in]
  // d_y is read by both. The default makes the two gemm calls, in that order; a backend may
  // share work between them (CUDA under bf16 precision rounds d_y to bf16 once). The
  // results are those of the two calls, bit for bit.
  virtual void linear_backward(std::int64_t n, std::int64_t out, std::int64_t in, const T* d_y, Weights w, const T* x,
                               T beta_x, T* d_x, T* d_w);
  // dst[i] = src[i] converted from src_type to dst_type (rounding to nearest even when
  // narrowing): a compute copy refreshed from its master, a master widened from its copy.
  virtual void convert(std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type);
  // adamw, then the compute copy of w refreshed (convert(n, w, T, copy, copy_type)). The
  // default makes the two calls; a backend may do both in one pass over w (CUDA with a
  // bf16 copy). The results are those of the two calls, bit for bit.
  virtual void adamw_with_copy(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s, void* copy,
                               DType copy_type);

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
  // Waits until every op issued so far, on every stream, has finished.
  virtual void synchronize() = 0;

  // ---- streams and events (the contract is in this file's header comment) ------------
  virtual Stream default_stream() const = 0;
  virtual Stream create_stream() = 0;
  virtual void destroy_stream(Stream s) = 0;  // waits for its work; not the default or current one
  virtual Stream current_stream() const = 0;
  virtual void set_stream(Stream s) = 0;      // where the ops issued next run
  virtual Event create_event() = 0;
  virtual void destroy_event(Event e) = 0;
  virtual void record(Event e, Stream s) = 0;
  virtual void wait(Stream s, Event e) = 0;   // later work on s waits for e; the host does not
  virtual bool query(Event e) = 0;            // has the recorded point passed? (never recorded: yes)
  virtual void synchronize(Event e) = 0;
  virtual void synchronize(Stream s) = 0;
  virtual void copy_to_device_async(void* dst, const void* src, std::size_t bytes, Stream s) = 0;
  virtual void copy_to_host_async(void* dst, const void* src, std::size_t bytes, Stream s) = 0;

  // ---- graphs: capture once, replay many times (CUDA graphs) --------------------------
  // Between begin_capture(s) and end_capture(s) the work issued on stream s is recorded,
  // not run; launch(g, s) runs it again with the same pointers and sizes (inputs are
  // changed by copying into the same buffers). Nothing in the captured region may
  // allocate, free, synchronise or copy to or from pageable host memory. A backend
  // without graphs answers false and throws std::logic_error from the others.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture(Stream s);
  virtual Graph end_capture(Stream s);
  virtual void launch(Graph g, Stream s);
  virtual void destroy_graph(Graph g) noexcept;

  // Free and total memory of the device; nullopt for host memory (the CPU backend), where
  // callers size what they keep from a budget of their own.
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }

  // The ops for scalar type T; throws std::logic_error when T is not supported.
  template <typename T> Ops<T>& ops();

  // ---- precision of products ---------------------------------------------------------
  // What gemm and attention of f32 operands may round those operands to: bf16 lets a
  // backend round them to bf16 and multiply on tensor cores, summing in f32 (PyTorch's
  // autocast, or its set_float32_matmul_precision("medium")); any other type asks for the
  // products as the operands are (the default). Set by whoever knows the tensors' types: a
  // model whose weights are bf16 runs its passes under PrecisionScope(be, bf16). A backend
  // without a faster path ignores it (the CPU computes exactly either way).
  void set_product_precision(DType d) { product_precision_ = d; }
  DType product_precision() const { return product_precision_; }

 protected:
  virtual Ops<float>* f32_ops() = 0;   // nullptr when unsupported
  virtual Ops<double>* f64_ops() = 0;

 private:
  DType product_precision_ = DType::f32;
};

template <> Ops<float>& Backend::ops<float>();
template <> Ops<double>& Backend::ops<double>();

// A stream or an event owned for a scope (destroyed with it).
class OwnedStream {
 public:
  explicit OwnedStream(Backend& be) : be_(&be), s_(be.create_stream()) {}
  ~OwnedStream() { if (be_) be_->destroy_stream(s_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  Stream get() const { return s_; }
  operator Stream() const { return s_; }

 private:
  Backend* be_;
  Stream s_;
};

class OwnedEvent {
 public:
  explicit OwnedEvent(Backend& be) : be_(&be), e_(be.create_event()) {}
  ~OwnedEvent() { if (be_) be_->destroy_event(e_); }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  Event get() const { return e_; }
  operator Event() const { return e_; }

 private:
  Backend* be_;
  Event e_;
};

// Makes s the backend's current stream for a scope, then restores the previous one.
class StreamScope {
 public:
  StreamScope(Backend& be, Stream s) : be_(be), prev_(be.current_stream()) { be.set_stream(s); }
  ~StreamScope() { be_.set_stream(prev_); }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Backend& be_;
  Stream prev_;
};

// Sets the backend's product precision for a scope, then restores the previous one.
class PrecisionScope {
 public:
  PrecisionScope(Backend& be, DType d) : be_(be), prev_(be.product_precision()) { be.set_product_precision(d); }
  ~PrecisionScope() { be_.set_product_precision(prev_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Backend& be_;
  DType prev_;
};

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
