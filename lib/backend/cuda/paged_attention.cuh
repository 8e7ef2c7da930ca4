// The paged KV cache on CUDA (backend::PagedKV, docs/gpu.md): writing a step's new key and
// value rows into their blocks, and decode attention that reads each sequence's keys
// through its block table.
//
// paged_attention: one block of 128 threads per (query row, group of up to 8 query heads
// that share a kv head, split of up to 512 keys: fewer, in whole tiles, when rows × heads
// are under 1024, so that a small batch still fills the GPU). Grouped-query heads share
// every key and value they load. Keys are visited in tiles of 128, one key per thread for
// the scores (the queries in shared memory, read as broadcasts); for Σ p·v each warp takes
// a quarter of the tile's keys and its lanes the head dimensions, reading value rows whole
// (coalesced), and the four warps' sums are added at the end; an online softmax carries
// the max and sum from tile to tile. Contexts longer than one split run as several blocks
// whose partial sums a second kernel combines (split-K, as in FlashDecoding / vLLM v2).
// The split comes from (rows, heads, max_context) on the host, and blocks past a row's
// own context return at once: a captured graph sized for the longest context stays right
// for every shorter one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// AttentionDims (backend.hpp), which the kernels' C++17 cannot include.
struct PagedShape {
  int n_heads, n_kv_heads, head_dim;
  std::int64_t q_stride;
};

// PagedKV (backend.hpp): cache rows of `row` elements, f32 or bf16 (raw bits).
struct PagedCache {
  const void* k;
  const void* v;
  bool bf16;
  int block_size;
  std::int64_t row;
};

// k_dst/v_dst rows slots[i] = k_src/v_src rows i (src_stride apart, row elements), converted;
// slots[i] < 0 skips the row.
void paged_kv_write(cudaStream_t s, std::int64_t n, const float* k_src, const float* v_src, std::int64_t src_stride,
                    const std::int32_t* slots, void* k_dst, void* v_dst, bool bf16, std::int64_t row);

// Scratch floats paged_attention needs for n rows (0 when the keys fit one split).
std::int64_t paged_attention_scratch(std::int64_t n, int n_heads, int head_dim, std::int64_t max_context);

// head_dim up to 256. Rows with row_ctx <= 0 are skipped. scratch: paged_attention_scratch floats.
void paged_attention(cudaStream_t s, const PagedShape& d, std::int64_t n, const float* q, const PagedCache& c,
                     const std::int32_t* block_tables, int max_blocks, const std::int32_t* row_seq,
                     const std::int32_t* row_ctx, std::int64_t max_context, float* out, float* scratch);

}  // namespace braid::backend::cuda
