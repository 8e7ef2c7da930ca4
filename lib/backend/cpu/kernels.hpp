// The CPU kernels behind CpuBackend, templated on the scalar type (float for work,
// double for gradient checks). Threads: the backend's pool (cpu/thread_pool.hpp).
// Semantics of each op are those of backend::Ops (backend/backend.hpp).
#pragma once

#include "backend/backend.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::backend::cpu {

// Loops over fewer elements than this run on one thread: a fork/join costs microseconds,
// more than the loop itself (decode steps are made of such loops).
constexpr std::int64_t kParallelMin = std::int64_t(1) << 15;

// Eight independent partial sums: without -ffast-math the compiler may not reorder a
// single running sum, and a scalar dot product made decode attention the bottleneck
// (the attention kernels: contiguous and paged).
template <typename T>
T dot(const T* a, const T* b, int n) {
  T acc[8] = {};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[c + u] * b[c + u];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; c < n; ++c) s += a[c] * b[c];
  return s;
}

template <typename T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

// The same product on the calling thread only, for use inside a parallel region.
template <typename T>
void gemm_serial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                 const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

// gemm with B stored as bf16 (raw bits), computed in T (cpu/gemm.cpp).
template <typename T>
void gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, T beta, T* c,
               std::int64_t ldc);

// Typed weight operands (cpu/typed_weights.cpp): the ops of Ops<T> that take Weights.
template <typename T>
void gemm_weights(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                  const T* a, std::int64_t lda, Weights b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
template <typename T>
void embedding_forward_weights(const std::int32_t* ids, std::int64_t n, Weights table, std::int64_t dim, T* out);
template <typename T>
void rmsnorm_forward_weights(const T* x, Weights w, const NormShape& s, T* y, T* rstd);
template <typename T>
void rmsnorm_backward_weights(const T* x, Weights w, const T* rstd, const T* dy, const NormShape& s, T* dx, T* dw);
void convert(std::int64_t n, const void* src, DType src_type, void* dst, DType dst_type);

template <typename T>
void embedding_forward(const std::int32_t* ids, std::int64_t n, const T* table, std::int64_t dim, T* out);
template <typename T>
void embedding_backward(const std::int32_t* ids, std::int64_t n, const T* d_out, std::int64_t dim,
                        T* d_table);

template <typename T>
void rmsnorm_forward(const T* x, const T* w, const NormShape& s, T* y, T* rstd);
template <typename T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, const NormShape& s, T* dx, T* dw);

template <typename T>
void rope(T* x, std::int64_t n, std::int64_t stride, int n_heads, int head_dim,
          const std::int32_t* pos, const T* cos, const T* sin, bool inverse);

template <typename T>
void attention_forward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const T* q,
                       const T* k, const T* v, T* out, T* lse);
template <typename T>
void attention_backward(const AttentionDims& dims, std::span<const AttentionSegment> segs, const T* q,
                        const T* k, const T* v, const T* out, const T* lse, const T* d_out, T* d_q,
                        T* d_k, T* d_v);

template <typename T>
void swiglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out);
template <typename T>
void swiglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up);
template <typename T>
void geglu_forward(const T* gate_up, std::int64_t n, std::int64_t inter, T* out);
template <typename T>
void geglu_backward(const T* gate_up, const T* d_out, std::int64_t n, std::int64_t inter, T* d_gate_up);

template <typename T>
void axpy(std::int64_t n, T alpha, const T* x, T* y);
template <typename T>
void scale(std::int64_t n, T alpha, T* x);
template <typename T>
double sum_squares(std::int64_t n, const T* x);
template <typename T>
void softcap(std::int64_t n, double cap, T* x);
template <typename T>
void softcap_backward(std::int64_t n, double cap, const T* y, T* d);
template <typename T>
void dropout(std::int64_t rows, std::int64_t cols, const T* x, const std::uint64_t* row_keys, std::int64_t col0,
             std::uint64_t seed, double p, T* out);

template <typename T>
void softmax_stats(const T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                   T* lse, T* logprob, T* entropy);
template <typename T>
void softmax_stats_backward(T* logits, std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                            const T* lse, const T* entropy, const T* d_logprob, const T* d_entropy);

template <typename T>
void adamw(std::int64_t n, T* w, const T* grad, T* m, T* v, const AdamWStep& s);

template <typename T>
PolicyLossSums policy_loss(std::int64_t n, const PolicyLossRows<T>& in, const PolicyLossOptions& opt, double scale,
                           T* d_logprob, T* d_entropy);
template <typename T>
ValueLossSums value_loss(std::int64_t n, const ValueLossRows<T>& in, double clip, double scale, T* d_values);
template <typename T>
PairwiseLossSums pairwise_loss(std::int64_t pairs, const T* values, const std::int64_t* chosen_rows,
                               const std::int64_t* rejected_rows, double scale, T* d_values);
template <typename T>
double nll_loss(std::int64_t n, const T* logprob, const T* weight, double scale, T* d_logprob);
template <typename T>
DpoLossSums dpo_loss(std::int64_t pairs, const DpoLossRows<T>& in, const DpoLossOptions& opt, double scale,
                     T* d_logprob);
template <typename T>
WhiteningStats whiten(std::int64_t n, T* x, const std::uint8_t* mask, double eps);

// The paged KV cache (cpu/paged_attention.cpp).
template <typename T>
void paged_kv_write(std::int64_t n, const T* k_src, const T* v_src, std::int64_t src_stride, const std::int32_t* slots,
                    const PagedKV& cache);
template <typename T>
void paged_attention(const AttentionDims& dims, std::int64_t n, const T* q, const PagedKV& cache,
                     const PagedRows& rows, T* out);

// Reused between rows: candidate ids, most likely first, and their weights.
struct SampleScratch {
  std::vector<std::int32_t> order;
  std::vector<double> weight;
};
// One row of sample(), on the calling thread.
template <typename T>
void sample_row(const T* logits, std::int64_t vocab, const SamplingSpec& spec, double uniform, SampleScratch& scratch,
                std::int32_t* token, T* logprob, T* raw_logprob);
template <typename T>
void sample(const T* logits, std::int64_t rows, std::int64_t vocab, const SamplingSpec& spec, const double* uniforms,
            std::int32_t* tokens, T* logprob, T* raw_logprob);

}  // namespace braid::backend::cpu
