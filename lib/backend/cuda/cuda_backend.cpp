// The CUDA backend: memory, streams, events and copies over the CUDA runtime, and Ops<float>
// as thin calls of the launchers beside this file (one .cu/.cuh pair per op family).
//
// Ordering beyond the plain CUDA model, so that code written against the CPU backend
// (where everything is synchronous) stays right:
//   * copy_*_async(..., s) on a stream other than the current one first makes s wait for
//     the work issued so far on the current stream (a fresh Buffer is zeroed there, and
//     the copy must not land before the zeros);
//   * deallocate() gives memory back on the current stream after it has waited for every
//     stream of the backend, so memory freed while another stream still reads it is not
//     handed out again too early.
// Scratch memory (partial sums, bf16 copies of A, attention's Σ dO·O) is kept per stream
// and only grows; attention's segment table is copied once per batch (per stream). Results
// that go to the host (sums, losses) synchronise the current stream.
#include "backend/cuda/cuda_backend.hpp"

#include "backend/cuda/adamw.cuh"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/embedding.cuh"
#include "backend/cuda/flash_attention.cuh"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/losses.cuh"
#include "backend/cuda/paged_attention.cuh"
#include "backend/cuda/rmsnorm.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/sample.cuh"
#include "backend/cuda/softmax_stats.cuh"
#include "backend/cuda/swiglu.cuh"
#include "core/error.hpp"
#include "core/units.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace braid::backend {
namespace {

using cuda::check;

// The device segments of a host list, with the total queries and keys.
// (q_pad, k_pad: the same with each segment's run padded to cuda::kSegmentPad.)
struct SegmentTable {
  std::vector<cuda::DeviceSegment> segs;
  std::int64_t total_q = 0, total_k = 0, q_pad = 0, k_pad = 0;
};

std::int64_t padded(std::int64_t n) { return (n + cuda::kSegmentPad - 1) / cuda::kSegmentPad * cuda::kSegmentPad; }

SegmentTable segment_table(std::span<const AttentionSegment> segs) {
  SegmentTable t;
  t.segs.reserve(segs.size());
  for (const AttentionSegment& s : segs) {
    t.segs.push_back({s.q_begin, s.q_len, s.kv_begin, s.past, t.total_q, t.total_k, t.q_pad, t.k_pad});
    t.total_q += s.q_len;
    t.total_k += s.past + s.q_len;
    t.q_pad += padded(s.q_len);
    t.k_pad += padded(s.past + s.q_len);
  }
  return t;
}

cuda::AttentionShape shape_of(const AttentionDims& d) {
  return {d.n_heads, d.n_kv_heads, d.head_dim, d.q_stride, d.kv_stride, d.scale, d.softcap, d.window};
}

// NormShape as the norm kernels take it (rmsnorm.cuh).
cuda::NormRows rows_of(const NormShape& s) {
  return {s.rows, s.dim, s.groups, s.row_stride(), s.eps, s.weight_offset, s.accumulate};
}

// AdamWStep as the AdamW kernels take it (adamw.cuh: their C++17 cannot include backend.hpp).
cuda::AdamWParams params_of(const AdamWStep& s) {
  return {s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.grad_scale, s.step};
}

class CudaBackend;

class CudaOps final : public Ops<float> {
 public:
  explicit CudaOps(CudaBackend& be) : be_(be) {}

  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override;
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
            std::int64_t lda, Weights b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override;
  void linear_backward(std::int64_t n, std::int64_t out, std::int64_t in, const float* d_y, Weights w,
                       const float* x, float beta_x, float* d_x, float* d_w) override;
  void embedding_forward(const std::int32_t* ids, std::int64_t n, const float* table, std::int64_t dim,
                         float* out) override {
    cuda::embedding_forward(stream(), ids, n, table, DType::f32, dim, out);
  }
  void embedding_forward(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim,
                         float* out) override {
    cuda::embedding_forward(stream(), ids, n, table.data, table.type, dim, out);
  }
  void embedding_backward(const std::int32_t* ids, std::int64_t n, const float* d_out, std::int64_t dim,
                          float* d_table) override {
    cuda::embedding_backward(stream(), ids, n, d_out, dim, d_table);
  }
  void rmsnorm_forward(const float* x, Weights w, const NormShape& sh, float* y, float* rstd) override {
    cuda::rmsnorm_forward(stream(), x, w.data, w.type, rows_of(sh), y, rstd);
  }
  void rmsnorm_backward(const float* x, Weights w, const float* rstd, const float* dy, const NormShape& sh, float* dx,
                        float* dw) override;
  void rope(float* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim, const std::int32_t* pos,
            const float* cos, const float* sin, bool inverse) override {
    cuda::rope(stream(), x, n, stride, n_heads, head_dim, pos, cos, sin, inverse);
  }
  void attention_forward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const float* q,
                         const float* k, const float* v, float* out, float* lse) override;
  void attention_backward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const float* q,
                          const float* k, const float* v, const float* out, const float* lse, const float* d_out,
                          float* d_q, float* d_k, float* d_v) override;
  void swiglu_forward(const float* gate_up, std::int64_t n, std::int64_t inter, float* out) override {
    cuda::swiglu_forward(stream(), gate_up, n, inter, out);
  }
  void swiglu_backward(const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                       float* d_gate_up) override {
    cuda::swiglu_backward(stream(), gate_up, d_out, n, inter, d_gate_up);
  }
  void geglu_forward(const float* gate_up, std::int64_t n, std::int64_t inter, float* out) override {
    cuda::geglu_forward(stream(), gate_up, n, inter, out);
  }
  void geglu_backward(const float* gate_up, const float* d_out, std::int64_t n, std::int64_t inter,
                      float* d_gate_up) override {
    cuda::geglu_backward(stream(), gate_up, d_out, n, inter, d_gate_up);
  }
  void axpy(std::int64_t n, float alpha, const float* x, float* y) override { cuda::axpy(stream(), n, alpha, x, y); }
  void scale(std::int64_t n, float alpha, float* x) override { cuda::scale(stream(), n, alpha, x); }
  void softcap(std::int64_t n, double cap, float* x) override { cuda::softcap(stream(), n, float(cap), x); }
  void softcap_backward(std::int64_t n, double cap, const float* y, float* d) override {
    cuda::softcap_backward(stream(), n, float(cap), y, d);
  }
  void dropout(std::int64_t rows, std::int64_t cols, const float* x, const std::uint64_t* row_keys, std::int64_t col0,
               std::uint64_t seed, double p, float* out) override {
    cuda::dropout(stream(), rows, cols, x, row_keys, col0, seed, p, out);
  }
  double sum_squares(std::int64_t n, const float* x) override {
    const std::span<const float> one(x, std::size_t(n));
    return global_sum_squares(std::span(&one, 1));
  }
  void softmax_stats(const float* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                     float* lse, float* logprob, float* entropy) override {
    cuda::softmax_stats(stream(), logits, rows, vocab, targets, lse, logprob, entropy);
  }
  void softmax_stats_backward(float* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                              const float* lse, const float* entropy, const float* d_logprob,
                              const float* d_entropy) override {
    cuda::softmax_stats_backward(stream(), logits, rows, vocab, targets, lse, entropy, d_logprob, d_entropy);
  }
  void adamw(std::int64_t n, float* w, const float* grad, float* m, float* v, const AdamWStep& s) override {
    cuda::adamw(stream(), n, w, grad, m, v, params_of(s));
  }
  // A bf16 copy is written by the update's own pass: w is not read a second time.
  void adamw_with_copy(std::int64_t n, float* w, const float* grad, float* m, float* v, const AdamWStep& s,
                       void* copy, DType copy_type) override {
    if (copy_type != DType::bf16) return Ops<float>::adamw_with_copy(n, w, grad, m, v, s, copy, copy_type);
    cuda::adamw_bf16_copy(stream(), n, w, grad, m, v, copy, params_of(s));
  }
  PolicyLossSums policy_loss(std::int64_t n, const PolicyLossRows<float>& in, const PolicyLossOptions& opt,
                             double scale, float* d_logprob, float* d_entropy) override {
    return cuda::policy_loss(stream(), n, in, opt, scale, d_logprob, d_entropy, loss_scratch(n));
  }
  ValueLossSums value_loss(std::int64_t n, const ValueLossRows<float>& in, double clip, double scale,
                           float* d_values) override {
    return cuda::value_loss(stream(), n, in, clip, scale, d_values, loss_scratch(n));
  }
  PairwiseLossSums pairwise_loss(std::int64_t pairs, const float* values, const std::int64_t* chosen_rows,
                                 const std::int64_t* rejected_rows, double scale, float* d_values) override {
    return cuda::pairwise_loss(stream(), pairs, values, chosen_rows, rejected_rows, scale, d_values,
                               loss_scratch(pairs));
  }
  double nll_loss(std::int64_t n, const float* logprob, const float* weight, double scale,
                  float* d_logprob) override {
    return cuda::nll_loss(stream(), n, logprob, weight, scale, d_logprob, loss_scratch(n));
  }
  DpoLossSums dpo_loss(std::int64_t pairs, const DpoLossRows<float>& in, const DpoLossOptions& opt, double scale,
                       float* d_logprob) override {
    return cuda::dpo_loss(stream(), pairs, in, opt, scale, d_logprob, loss_scratch(pairs));
  }
  WhiteningStats whiten(std::int64_t n, float* x, const std::uint8_t* mask, double eps) override {
    return cuda::whiten(stream(), n, x, mask, eps, loss_scratch(n));
  }
  void paged_kv_write(std::int64_t n, const float* k_src, const float* v_src, std::int64_t src_stride,
                      const std::int32_t* slots, const PagedKV& c) override {
    cuda::paged_kv_write(stream(), n, k_src, v_src, src_stride, slots, c.k, c.v, paged_bf16(c, "paged_kv_write"), c.row);
  }
  void paged_attention(const AttentionDims& dims, std::int64_t n, const float* q, const PagedKV& c,
                       const PagedRows& rows, float* out) override;
  void sample(const float* logits, std::int64_t rows, std::int64_t vocab, const SamplingSpec& spec,
              const double* uniforms, std::int32_t* tokens, float* logprob, float* raw_logprob) override {
    cuda::sample(stream(), logits, rows, vocab, {spec.temperature, spec.top_k, spec.top_p, spec.greedy()}, uniforms,
                 tokens, logprob, raw_logprob);
  }
  double global_sum_squares(std::span<const std::span<const float>> xs) override;
  void convert(std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type) override {
    cuda::convert(stream(), n, src, src_type, dst, dst_type);
  }

 private:
  cudaStream_t stream() const;
  double* loss_scratch(std::int64_t n);
  bool flash(const cuda::AttentionShape& shape, std::initializer_list<const void*> pointers) const;
  void gemm_bf16(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 std::int64_t lda, const void* b, DType b_type, std::int64_t ldb, float beta, float* c,
                 std::int64_t ldc);
  static bool paged_bf16(const PagedKV& c, const char* op);

  CudaBackend& be_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device), ops_(*this) {
    check(cudaSetDevice(device), "select device");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "device properties");
    device_name_ = prop.name;
    check(cudaStreamCreateWithFlags(&default_, cudaStreamNonBlocking), "create stream");
    current_ = default_;
    check(cudaEventCreateWithFlags(&order_, cudaEventDisableTiming), "create event");
    // A pool of our own that keeps what is given back (release threshold: never), so that
    // after the first step every allocation is served from the cache. Where the driver has
    // no stream-ordered pools (some virtualised GPUs), a cache of cudaMalloc blocks instead.
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    if (pools) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      check(cudaMemPoolCreate(&pool_, &props), "create memory pool");
      std::uint64_t keep = UINT64_MAX;
      check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "configure memory pool");
    }
    gemm_ = std::make_unique<cuda::Gemm>();
    // The environment's choices of the fast paths (docs/gpu.md), read once; a bad value
    // is the user's, named with the variable.
    try {
      gemm_path_ = cuda::gemm_path_from_env();
      attention_path_ = cuda::attention_path_from_env();
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }

  ~CudaBackend() override {
    cudaDeviceSynchronize();
    for (auto& [s, c] : segment_cache_) {
      if (c.device) raw_free(c.device, default_);
    }
    for (auto& [s, sc] : scratch_) {
      if (sc.p) raw_free(sc.p, default_);
    }
    cudaStreamSynchronize(default_);
    for (auto& [bytes, blocks] : cached_) {
      for (void* b : blocks) cudaFree(b);
    }
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    gemm_.reset();
    cudaEventDestroy(order_);
    cudaStreamDestroy(default_);
    if (pool_) cudaMemPoolDestroy(pool_);
  }

  std::string name() const override { return fmt::format("cuda:{}", device_); }
  int threads() const override { return 1; }
  // Every op in f32; bf16 as the type of weights (gemm, embedding, rmsnorm) and of the
  // compute copy AdamW refreshes (convert), as on the CPU; no f64.
  bool supports(Op op, DType dtype) const override {
    if (dtype == DType::f32) return true;
    if (dtype == DType::bf16) {
      return op == Op::gemm || op == Op::embedding || op == Op::rmsnorm || op == Op::adamw || op == Op::paged_attention;
    }
    return false;
  }
  bool host_accessible() const override { return false; }

  // CUDA graphs (the decode step: lib/generate/decode_graph.hpp). Thread-local capture: only
  // this thread's calls are checked against the capture.
  bool supports_graphs() const override { return true; }
  void begin_capture(Stream s) override {
    check(cudaStreamBeginCapture(live(s), cudaStreamCaptureModeThreadLocal), "begin graph capture");
  }
  Graph end_capture(Stream s) override {
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(live(s), &graph), "end graph capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(err, "instantiate graph");
    return Graph{exec};
  }
  void launch(Graph g, Stream s) override {
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(g.handle), live(s)), "launch graph");
  }
  void destroy_graph(Graph g) noexcept override {
    if (g.handle) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g.handle));
  }
  // Free memory counts what braid's own pool caches for reuse (given back, not released
  // to the driver): a second generation run in one process sees the first's KV cache as free.
  std::optional<DeviceMemory> device_memory() const override {
    const DeviceMemoryStats s = memory_stats();
    return DeviceMemory{s.free + (s.reserved > s.live ? s.reserved - s.live : 0), s.total};
  }

  void* allocate(std::size_t bytes) override {
    std::size_t rounded = std::max<std::size_t>(256, (bytes + 255) / 256 * 256);
    void* p = nullptr;
    cudaError_t err = raw_alloc(&p, rounded, current_);
    if (err == cudaErrorMemoryAllocation) {
      // Memory given back on other streams returns to the pool once their work is done
      // (and cached blocks go back to the driver): wait for it, and try once more.
      cudaGetLastError();
      cudaDeviceSynchronize();
      release_cached();
      err = raw_alloc(&p, rounded, current_);
    }
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw InputError(fmt::format("--device {}", name()), "device memory",
                       fmt::format("allocating {} ({} bytes) failed: out of memory on {} ({} in use by braid, "
                                   "peak {}; {} free of {})",
                                   gib(bytes), bytes, device_name_, gib(live_), gib(peak_), gib(free), gib(total)));
    }
    check(err, "allocate");
    std::lock_guard lock(mu_);
    sizes_[p] = rounded;
    live_ += rounded;
    peak_ = std::max(peak_, live_);
    return p;
  }

  void deallocate(void* p) noexcept override {
    if (!p) return;
    {
      std::lock_guard lock(mu_);
      auto it = sizes_.find(p);
      if (it == sizes_.end()) return;  // not ours: nothing to give back
      live_ -= it->second;
      sizes_.erase(it);
    }
    for (cudaStream_t s : streams_) {
      if (s == current_) continue;
      if (cudaEventRecord(order_, s) == cudaSuccess) cudaStreamWaitEvent(current_, order_, 0);
    }
    if (current_ != default_ && cudaEventRecord(order_, default_) == cudaSuccess) {
      cudaStreamWaitEvent(current_, order_, 0);
    }
    raw_free(p, current_);
  }

  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_), "copy_to_device");
    check(cudaStreamSynchronize(current_), "copy_to_device");
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_), "copy_to_host");
    check(cudaStreamSynchronize(current_), "copy_to_host");
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current_), "copy");
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemsetAsync(dst, 0, bytes, current_), "fill_zero");
  }
  void synchronize() override { check(cudaDeviceSynchronize(), "synchronize"); }

  Stream default_stream() const override { return Stream{default_}; }
  Stream create_stream() override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "create stream");
    streams_.insert(s);
    return Stream{s};
  }
  void destroy_stream(Stream s) override {
    if (s.handle == default_) throw std::logic_error("cuda backend: the default stream cannot be destroyed");
    if (s.handle == current_) throw std::logic_error("cuda backend: the current stream cannot be destroyed");
    cudaStream_t cs = live(s);
    streams_.erase(cs);
    check(cudaStreamSynchronize(cs), "destroy stream");
    if (auto it = segment_cache_.find(cs); it != segment_cache_.end()) {
      if (it->second.device) raw_free(it->second.device, cs);
      segment_cache_.erase(it);
    }
    if (auto it = scratch_.find(cs); it != scratch_.end()) {
      if (it->second.p) raw_free(it->second.p, cs);
      scratch_.erase(it);
      check(cudaStreamSynchronize(cs), "destroy stream");
    }
    check(cudaStreamDestroy(cs), "destroy stream");
  }
  Stream current_stream() const override { return Stream{current_}; }
  void set_stream(Stream s) override { current_ = live(s); }
  Event create_event() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "create event");
    events_.insert(e);
    return Event{e};
  }
  void destroy_event(Event e) override {
    cudaEvent_t ce = live(e);
    events_.erase(ce);
    check(cudaEventDestroy(ce), "destroy event");
  }
  void record(Event e, Stream s) override { check(cudaEventRecord(live(e), live(s)), "record event"); }
  void wait(Stream s, Event e) override { check(cudaStreamWaitEvent(live(s), live(e), 0), "wait for event"); }
  bool query(Event e) override {
    const cudaError_t err = cudaEventQuery(live(e));
    if (err == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    check(err, "query event");
    return true;
  }
  void synchronize(Event e) override { check(cudaEventSynchronize(live(e)), "synchronize event"); }
  void synchronize(Stream s) override { check(cudaStreamSynchronize(live(s)), "synchronize stream"); }
  void copy_to_device_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    cudaStream_t cs = ordered_after_current(s, "copy_to_device_async");
    if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs), "copy_to_device_async");
  }
  void copy_to_host_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    cudaStream_t cs = ordered_after_current(s, "copy_to_host_async");
    if (bytes > 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cs), "copy_to_host_async");
  }

  // For CudaOps.
  cudaStream_t stream() const { return current_; }
  cuda::Gemm& gemm() { return *gemm_; }
  cuda::GemmPath gemm_path() const { return gemm_path_; }
  cuda::AttentionPath attention_path() const { return attention_path_; }
  // Scratch of at least `bytes` for work on the current stream (valid until the next call).
  void* scratch(std::size_t bytes) {
    Scratch& sc = scratch_[current_];
    if (sc.bytes < bytes) {
      if (sc.p) raw_free(sc.p, current_);
      std::size_t grown = std::max(bytes, sc.bytes * 3 / 2);
      sc.p = nullptr;
      sc.bytes = 0;
      const cudaError_t err = raw_alloc(&sc.p, grown, current_);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw InputError(fmt::format("--device {}", name()), "device memory",
                         fmt::format("allocating {} of scratch for an op failed: out of memory on {} ({} in use by "
                                     "braid, peak {})",
                                     gib(grown), device_name_, gib(live_), gib(peak_)));
      }
      check(err, "scratch");
      sc.bytes = grown;
    }
    return sc.p;
  }

  // The segment table of an attention call in device memory. Every layer of a forward
  // attends over the same segments: the table is copied once per batch (per stream) and
  // reused while it stays the same.
  const cuda::DeviceSegment* segments(const std::vector<cuda::DeviceSegment>& table) {
    SegmentCache& c = segment_cache_[current_];
    const bool same = c.host.size() == table.size() &&
                      std::equal(c.host.begin(), c.host.end(), table.begin(), [](const auto& a, const auto& b) {
                        return a.q_begin == b.q_begin && a.q_len == b.q_len && a.kv_begin == b.kv_begin &&
                               a.past == b.past;
                      });
    if (same && c.device) return c.device;
    const std::size_t bytes = table.size() * sizeof(cuda::DeviceSegment);
    if (c.capacity < bytes) {
      if (c.device) deallocate(c.device);
      c.device = nullptr;
      c.device = static_cast<cuda::DeviceSegment*>(allocate(bytes));
      c.capacity = bytes;
    }
    c.host = table;
    // From c.host, which stays put until the next change; the copy is complete before the
    // next change because that change first waits here.
    check(cudaStreamSynchronize(current_), "attention (segment table)");
    check(cudaMemcpyAsync(c.device, c.host.data(), bytes, cudaMemcpyHostToDevice, current_), "attention (segment table)");
    return c.device;
  }

  DeviceMemoryStats memory_stats() const {
    DeviceMemoryStats m;
    {
      std::lock_guard lock(mu_);
      m.live = live_;
      m.peak = peak_;
    }
    if (pool_) {
      std::uint64_t reserved = 0;
      cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved);
      m.reserved = std::size_t(reserved);
    } else {
      std::lock_guard lock(mu_);
      m.reserved = cached_bytes_ + live_;
    }
    cudaMemGetInfo(&m.free, &m.total);
    return m;
  }

 protected:
  Ops<float>* f32_ops() override { return &ops_; }
  Ops<double>* f64_ops() override { return nullptr; }

 private:
  struct Scratch {
    void* p = nullptr;
    std::size_t bytes = 0;
  };
  struct SegmentCache {
    std::vector<cuda::DeviceSegment> host;
    cuda::DeviceSegment* device = nullptr;
    std::size_t capacity = 0;
  };

  // Device memory from the pool, or from the cache of cudaMalloc blocks (sizes rounded to
  // 512 bytes below 1 MiB, to 2 MiB above, so that blocks fit the next request of a size).
  cudaError_t raw_alloc(void** p, std::size_t& bytes, cudaStream_t s) {
    if (pool_) return cudaMallocFromPoolAsync(p, bytes, pool_, s);
    const std::size_t unit = bytes < (std::size_t{1} << 20) ? 512 : (std::size_t{1} << 21);
    bytes = (bytes + unit - 1) / unit * unit;
    {
      std::lock_guard lock(mu_);
      auto it = cached_.find(bytes);
      if (it != cached_.end() && !it->second.empty()) {
        *p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= bytes;
        return cudaSuccess;
      }
    }
    const cudaError_t err = cudaMalloc(p, bytes);
    if (err == cudaSuccess) {
      std::lock_guard lock(mu_);
      raw_sizes_[*p] = bytes;
    }
    return err;
  }
  // Back to the pool in stream order, or into the cache once the stream is done with it.
  void raw_free(void* p, cudaStream_t s) noexcept {
    if (pool_) {
      cudaFreeAsync(p, s);
      return;
    }
    cudaStreamSynchronize(s);
    std::size_t bytes = 0;
    {
      std::lock_guard lock(mu_);
      auto it = raw_sizes_.find(p);
      if (it == raw_sizes_.end()) return;
      bytes = it->second;
      cached_[bytes].push_back(p);
      cached_bytes_ += bytes;
    }
  }
  void release_cached() noexcept {
    std::lock_guard lock(mu_);
    for (auto& [bytes, blocks] : cached_) {
      for (void* b : blocks) {
        cudaFree(b);
        raw_sizes_.erase(b);
      }
    }
    cached_.clear();
    cached_bytes_ = 0;
  }

  cudaStream_t live(Stream s) const {
    auto cs = static_cast<cudaStream_t>(s.handle);
    if (cs != default_ && !streams_.count(cs)) throw std::logic_error("cuda backend: not a live stream of this backend");
    return cs;
  }
  cudaEvent_t live(Event e) const {
    auto ce = static_cast<cudaEvent_t>(e.handle);
    if (!events_.count(ce)) throw std::logic_error("cuda backend: not a live event of this backend");
    return ce;
  }
  cudaStream_t ordered_after_current(Stream s, const char* op) {
    cudaStream_t cs = live(s);
    if (cs != current_) {
      check(cudaEventRecord(order_, current_), op);
      check(cudaStreamWaitEvent(cs, order_, 0), op);
    }
    return cs;
  }

  int device_;
  std::string device_name_;
  cudaStream_t default_ = nullptr, current_ = nullptr;
  cudaEvent_t order_ = nullptr;  // internal: orders one stream after another
  std::set<cudaStream_t> streams_;
  std::set<cudaEvent_t> events_;
  cudaMemPool_t pool_ = nullptr;  // null: no pools on this device; cached_ instead
  std::map<std::size_t, std::vector<void*>> cached_;       // free cudaMalloc blocks by size
  std::unordered_map<void*, std::size_t> raw_sizes_;      // every cudaMalloc block's size
  std::size_t cached_bytes_ = 0;
  std::unique_ptr<cuda::Gemm> gemm_;
  cuda::GemmPath gemm_path_ = cuda::GemmPath::lt;
  cuda::AttentionPath attention_path_ = cuda::AttentionPath::flash;
  mutable std::mutex mu_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t live_ = 0, peak_ = 0;
  std::map<cudaStream_t, Scratch> scratch_;
  std::map<cudaStream_t, SegmentCache> segment_cache_;
  CudaOps ops_;
};

cudaStream_t CudaOps::stream() const { return be_.stream(); }

double* CudaOps::loss_scratch(std::int64_t n) {
  return static_cast<double*>(be_.scratch(std::size_t(cuda::loss_scratch(n)) * sizeof(double)));
}

// Exact unless the backend's product precision is bf16 (a bf16 model's passes): then on
// tensor cores with both operands rounded to bf16.
void CudaOps::gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                   std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (be_.product_precision() == DType::bf16) {
    return gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, DType::f32, ldb, beta, c, ldc);
  }
  be_.gemm().f32(stream(), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CudaOps::gemm_bf16(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                        std::int64_t lda, const void* b, DType b_type, std::int64_t ldb, float beta, float* c,
                        std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const std::size_t bytes = cuda::Gemm::bf16_scratch_bytes(ta, tb, m, n, k, b_type, be_.gemm_path());
  be_.gemm().bf16(stream(), be_.gemm_path(), ta, tb, m, n, k, alpha, a, lda, b, b_type, ldb, beta, c, ldc,
                  be_.scratch(bytes));
}

void CudaOps::gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                   std::int64_t lda, Weights b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (b.type == DType::f32) return gemm(ta, tb, m, n, k, alpha, a, lda, static_cast<const float*>(b.data), ldb, beta, c, ldc);
  if (b.type != DType::bf16) {
    throw std::logic_error("gemm: no " + std::string(dtype_name(b.type)) + " weights in f32 ops on CUDA");
  }
  gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b.data, b.type, ldb, beta, c, ldc);
}

// Under bf16 precision on the packing paths: d_y is rounded to bf16 once, into the scratch
// both products use (sized for the larger), and the second product reads it from there.
void CudaOps::linear_backward(std::int64_t n, std::int64_t out, std::int64_t in, const float* d_y, Weights w,
                              const float* x, float beta_x, float* d_x, float* d_w) {
  const cuda::GemmPath path = be_.gemm_path();
  const bool typed = w.type == DType::f32 || w.type == DType::bf16;
  if (be_.product_precision() != DType::bf16 || path == cuda::GemmPath::fast16bf || !typed || n == 0 || out == 0 ||
      in == 0) {
    return Ops<float>::linear_backward(n, out, in, d_y, w, x, beta_x, d_x, d_w);
  }
  const std::size_t bytes = std::max(cuda::Gemm::bf16_scratch_bytes(false, false, n, in, out, w.type, path),
                                     cuda::Gemm::bf16_scratch_bytes(true, false, out, in, n, DType::f32, path));
  void* scratch = be_.scratch(bytes);
  be_.gemm().bf16(stream(), path, false, false, n, in, out, 1.f, d_y, out, w.data, w.type, in, beta_x, d_x, in,
                  scratch);
  be_.gemm().bf16(stream(), path, true, false, out, in, n, 1.f, d_y, out, x, DType::f32, in, 1.f, d_w, in, scratch,
                  /*a_packed=*/true);
}

void CudaOps::rmsnorm_backward(const float* x, Weights w, const float* rstd, const float* dy, const NormShape& sh,
                               float* dx, float* dw) {
  const std::int64_t floats = cuda::rmsnorm_backward_scratch(sh.rows * sh.groups, sh.dim);
  auto* partial = static_cast<float*>(be_.scratch(std::size_t(floats) * sizeof(float) + 4));
  cuda::rmsnorm_backward(stream(), x, w.data, w.type, rstd, dy, rows_of(sh), dx, dw, partial);
}

void CudaOps::attention_forward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const float* q,
                                const float* k, const float* v, float* out, float* lse) {
  const SegmentTable t = segment_table(segs);
  if (t.total_q == 0) return;
  const cuda::AttentionShape shape = shape_of(dims);
  if (flash(shape, {q, k, v, out})) {
    return cuda::flash_attention_forward(stream(), shape, be_.segments(t.segs), int(t.segs.size()), t.q_pad, t.k_pad,
                                         q, k, v, out, lse,
                                         be_.scratch(cuda::flash_attention_forward_scratch(shape, t.k_pad)));
  }
  cuda::attention_forward(stream(), shape, be_.segments(t.segs), int(t.segs.size()), t.total_q, q, k, v, out, lse);
}

// The tensor-core kernels under bf16 product precision, unless BRAID_CUDA_ATTENTION=exact
// or the shape is not theirs (flash_attention.cuh); the exact kernels otherwise.
bool CudaOps::flash(const cuda::AttentionShape& shape, std::initializer_list<const void*> pointers) const {
  return be_.product_precision() == DType::bf16 && be_.attention_path() == cuda::AttentionPath::flash &&
         cuda::flash_attention_supports(shape, pointers);
}

void CudaOps::attention_backward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const float* q,
                                 const float* k, const float* v, const float* out, const float* lse,
                                 const float* d_out, float* d_q, float* d_k, float* d_v) {
  const SegmentTable t = segment_table(segs);
  if (t.total_q == 0) return;
  const cuda::DeviceSegment* d_segs = be_.segments(t.segs);
  const cuda::AttentionShape shape = shape_of(dims);
  if (flash(shape, {q, k, v, out, d_out, d_q, d_k, d_v})) {
    return cuda::flash_attention_backward(stream(), shape, d_segs, int(t.segs.size()), t.total_q, t.q_pad, t.k_pad, q,
                                          k, v, out, lse, d_out, d_q, d_k, d_v,
                                          be_.scratch(cuda::flash_attention_backward_scratch(shape, t.q_pad, t.k_pad)));
  }
  auto* dsum = static_cast<float*>(be_.scratch(std::size_t(t.total_q) * std::size_t(dims.n_heads) * sizeof(float)));
  cuda::attention_backward(stream(), shape, d_segs, int(t.segs.size()), t.total_q, t.total_k, q, k, v, out, lse, d_out,
                           d_q, d_k, d_v, dsum);
}

bool CudaOps::paged_bf16(const PagedKV& c, const char* op) {
  if (c.dtype != DType::f32 && c.dtype != DType::bf16) {
    throw std::logic_error(std::string(op) + ": no " + std::string(dtype_name(c.dtype)) + " KV cache on CUDA");
  }
  return c.dtype == DType::bf16;
}

void CudaOps::paged_attention(const AttentionDims& dims, std::int64_t n, const float* q, const PagedKV& c,
                              const PagedRows& rows, float* out) {
  const bool bf16 = paged_bf16(c, "paged_attention");
  const cuda::PagedShape shape{dims.n_heads, dims.n_kv_heads, dims.head_dim, dims.q_stride,
                               dims.scale,   dims.softcap,    dims.window};
  const std::int64_t floats = cuda::paged_attention_scratch(n, dims.n_heads, dims.head_dim, rows.max_context);
  auto* scratch = floats > 0 ? static_cast<float*>(be_.scratch(std::size_t(floats) * sizeof(float))) : nullptr;
  cuda::paged_attention(stream(), shape, n, q, cuda::PagedCache{c.k, c.v, bf16, c.block_size, c.row}, rows.block_tables,
                        rows.max_blocks, rows.row_seq, rows.row_ctx, rows.max_context, out, scratch);
}

double CudaOps::global_sum_squares(std::span<const std::span<const float>> xs) {
  if (xs.empty()) return 0;
  const std::size_t per = cuda::kReduceBlocks;
  auto* partial = static_cast<double*>(be_.scratch(xs.size() * per * sizeof(double)));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    cuda::sum_squares_partials(stream(), std::int64_t(xs[i].size()), xs[i].data(), partial + i * per);
  }
  std::vector<double> host(xs.size() * per);
  check(cudaMemcpyAsync(host.data(), partial, host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
        "global_sum_squares");
  check(cudaStreamSynchronize(stream()), "global_sum_squares");
  double s = 0;
  for (double p : host) s += p;  // tensor by tensor, block by block: the same order every time
  return s;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

std::optional<DeviceMemoryStats> device_memory_stats(Backend& be) {
  if (auto* c = dynamic_cast<CudaBackend*>(&be)) return c->memory_stats();
  return std::nullopt;
}

}  // namespace braid::backend
