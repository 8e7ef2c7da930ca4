// Causal grouped-query attention over packed variable-length segments on CUDA, in the
// flash manner: the scores are never stored (no T×T matrix in memory); the forward keeps
// a running max and sum per query (online softmax) and saves the log-sum-exp, from which
// the backward recomputes the probabilities.
//
// Correctness first: one warp per (query, head) in the forward and for d_q, one warp per
// (key, kv head) for d_k and d_v (each warp owns its output rows, so there are no atomics),
// keys visited one at a time with the head dimension spread over the lanes. No shared-memory
// tiling and no tensor cores yet: fast enough for tests and scoring small models, far from
// FlashAttention's speed at sequence length 2048 (docs/gpu.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// A segment as the kernels read it: AttentionSegment (backend.hpp) plus where its queries
// and keys start in the enumeration of all queries (q_first) and all keys (k_first) of the
// batch, and in the same enumerations with each segment's run padded to a multiple of
// kSegmentPad (q_pad_first, k_pad_first): the tiled kernels give every tile of kSegmentPad or
// a divisor of it rows one block, found from its padded position.
struct DeviceSegment {
  std::int64_t q_begin, q_len, kv_begin, past, q_first, k_first, q_pad_first, k_pad_first;
};
constexpr std::int64_t kSegmentPad = 128;

// Which kernels attention under bf16 product precision runs (BRAID_CUDA_ATTENTION, read when
// called): "flash" (unset: the tensor-core kernels of flash_attention.cuh where they take the
// shape) or "exact" (the kernels below, as for f32). std::invalid_argument naming the
// variable for any other value.
enum class AttentionPath { flash, exact };
AttentionPath attention_path_from_env();

// AttentionDims (backend.hpp), which the kernels' C++17 cannot include: the scores are
// scale · q·k (scale 0: 1/√head_dim), soft-capped to softcap · tanh(s / softcap) when
// softcap > 0; window > 0: a query at position p sees keys p − window < j <= p only.
struct AttentionShape {
  int n_heads, n_kv_heads, head_dim;
  std::int64_t q_stride, kv_stride;
  double scale = 0, softcap = 0;
  std::int64_t window = 0;
};

// head_dim up to 256.
void attention_forward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                       std::int64_t total_q, const float* q, const float* k, const float* v, float* out, float* lse);
// scratch: total_q · n_heads floats (Σ dO·O per query and head).
void attention_backward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                        std::int64_t total_q, std::int64_t total_k, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, const float* d_out, float* d_q, float* d_k, float* d_v,
                        float* scratch);

}  // namespace braid::backend::cuda
