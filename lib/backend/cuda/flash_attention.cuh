// Causal grouped-query attention over packed variable-length segments on the tensor cores,
// in the manner of FlashAttention-2: bf16 mma.sync (m16n8k16) with f32 accumulation, online
// softmax in registers, the log-sum-exp saved, no T×T matrix in memory. The contract is
// attention.cuh's (the same segments, strides, lse in natural log, d_q written, d_k and d_v
// accumulated), so the exact kernels and these are interchangeable: either's lse serves the
// other's backward.
//
// The tiles the kernels stream come from bf16 copies made first, in the scratch (K and V; for
// the backward also q, dO, lse in log2 units and Σ dO·O), by padded position with zeros on the
// padding: a tile is then one cp.async copy into shared memory, double-buffered (the next tile
// is copied while the current one is multiplied; one __syncthreads a tile), and half the bytes
// of f32. The forward gives a block 128 queries of one head (8 warps, 16 rows a warp), the d_q
// kernel 64 (4 warps); both walk the keys in tiles of 64 up to the causal limit, masking only
// the tiles that cross it, and a warp skips the tiles past its own rows' limit. The d_k/d_v
// kernel gives a block 64 keys of one kv head and walks every query that sees them, over all
// heads of the kv head's group, so that each key row is owned by one block (no atomics: the
// result does not depend on timing). The backward thus recomputes the scores twice (once per
// kernel): 7 products per tile instead of 5, for determinism.
//
// Segments: a tile's rows never cross a segment (each segment's run is padded to a multiple of
// kSegmentPad in the block numbering, and the blocks of padding exit at once); rows past a
// segment's end are zeros (staged so, or zeros in the copies) and never written, so lengths
// need not be multiples of the tile. Query i of a segment sees keys 0 .. past + i.
//
// Rounding: q, k, v, dO and the probabilities are rounded to bf16; scores, the softmax, the
// sums and every output are f32. Tolerance against the exact kernels: docs/gpu.md.
#pragma once

#include "backend/cuda/attention.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace braid::backend::cuda {

// Whether these kernels take the shape: head_dim 64 or 128, n_heads a multiple of
// n_kv_heads, row strides multiples of 4 floats and every pointer given 16-byte aligned
// (rows are read as float4). The backend runs the exact kernels otherwise.
bool flash_attention_supports(const AttentionShape& d, std::initializer_list<const void*> pointers);

// q_pad_total / k_pad_total: the padded query and key counts (the last segment's
// q_pad_first / k_pad_first plus its padded run). scratch: the bytes the *_scratch function
// gives, 16-byte aligned (the bf16 copies; valid only during the call).
std::size_t flash_attention_forward_scratch(const AttentionShape& d, std::int64_t k_pad_total);
void flash_attention_forward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                             std::int64_t q_pad_total, std::int64_t k_pad_total, const float* q, const float* k,
                             const float* v, float* out, float* lse, void* scratch);
std::size_t flash_attention_backward_scratch(const AttentionShape& d, std::int64_t q_pad_total,
                                             std::int64_t k_pad_total);
void flash_attention_backward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                              std::int64_t total_q, std::int64_t q_pad_total, std::int64_t k_pad_total,
                              const float* q, const float* k, const float* v, const float* out, const float* lse,
                              const float* d_out, float* d_q, float* d_k, float* d_v, void* scratch);

}  // namespace braid::backend::cuda
