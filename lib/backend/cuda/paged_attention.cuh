// The paged KV cache on CUDA (backend::PagedKV, docs/gpu.md): writing a step's new key and
// value rows into their blocks, and decode attention that reads each sequence's keys
// through its block table.
//
// paged_attention: one block of 4 warps per (query row, group of up to 8 query heads that
// share a kv head, split of the context). Grouped-query heads share every key and value
// they load. A key row is held by a group of lanes, each loading 16 bytes of it (4 keys a
// warp load for bf16 rows of 64), and every lane group runs its own online softmax over
// the keys it visits, so the key loop has no block-wide step; groups and warps are merged
// once at the end. A context is cut into several splits only when rows × heads are too few
// to fill the GPU; a second kernel combines their partial sums (split-K, as in
// FlashDecoding / vLLM v2). The split comes from (rows, heads, max_context) on the host,
// and blocks past a row's own context return at once: a captured graph sized for the
// longest context stays right for every shorter one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace braid::backend::cuda {

// AttentionDims (backend.hpp), which the kernels' C++17 cannot include: scores scale · q·k
// (0: 1/√head_dim), soft-capped when softcap > 0; window > 0: the query (at position
// row_ctx − 1) sees only the last `window` keys.
struct PagedShape {
  int n_heads, n_kv_heads, head_dim;
  std::int64_t q_stride;
  double scale = 0, softcap = 0;
  std::int64_t window = 0;
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
