#include "backend/cuda/paged_attention.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 128;           // per block; one key each for the scores
constexpr int kTile = kThreads;         // keys per tile
constexpr int kMaxSplit = 4 * kTile;    // most keys per split
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;
// Rows × heads below which a context is split more finely than kMaxSplit, so that a batch
// of few sequences still spreads over the GPU's multiprocessors (132 on an H100/H200).
constexpr std::int64_t kFillHeads = 1024;

__device__ __forceinline__ void store_as(float* p, long long i, float x) { p[i] = x; }
__device__ __forceinline__ void store_as(unsigned short* p, long long i, float x) {
  p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

template <typename KV>
__global__ void paged_kv_write_kernel(std::int64_t n, const float* k_src, const float* v_src, std::int64_t src_stride,
                                      const std::int32_t* slots, KV* k_dst, KV* v_dst, std::int64_t row) {
  const std::int64_t total = n * row;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / row, e = i % row;
    const std::int32_t slot = slots[r];
    if (slot < 0) continue;
    store_as(k_dst, std::int64_t(slot) * row + e, k_src[r * src_stride + e]);
    store_as(v_dst, std::int64_t(slot) * row + e, v_src[r * src_stride + e]);
  }
}

// Block-wide max (or sum) of G values per thread at once: one pass through shared memory.
template <int G, bool kMax>
__device__ void block_reduce(float (&v)[G], float (&red)[kWarps][G]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int g = 0; g < G; ++g) v[g] = kMax ? warp_max(v[g]) : warp_sum(v[g]);
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) red[warp][g] = v[g];
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float r = red[0][g];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) r = kMax ? fmaxf(r, red[w][g]) : r + red[w][g];
    v[g] = r;
  }
  __syncthreads();  // red[] is reused by the next call
}

// Grid: (rows, n_kv_heads · group / G, splits of split_keys keys). Shared: slots[kTile],
// q[G × hd], p[G × kTile], o[kWarps × G × hd]. Scores: one key per thread. Values: warp w
// takes the keys w, w + kWarps, ... of a tile and lane l the dimensions l + 32·i (i < DL:
// head_dim ≤ 32·DL), reading each value row whole (coalesced); the warps' sums are added
// at the end.
template <typename KV, int G, int DL>
__global__ void __launch_bounds__(kThreads)
paged_attention_kernel(PagedShape d, const float* q, const KV* k, const KV* v, int block_size, std::int64_t row,
                       const std::int32_t* tables, int max_blocks, const std::int32_t* row_seq,
                       const std::int32_t* row_ctx, int split_keys, float* out, float* part_o, float* part_ml) {
  extern __shared__ std::int64_t shared[];
  __shared__ float red[kWarps][G];
  const int hd = d.head_dim;
  std::int64_t* slot_s = shared;                          // [kTile]
  float* q_s = reinterpret_cast<float*>(shared + kTile);  // [G × hd], pre-scaled by 1/√hd
  float* p_s = q_s + G * hd;                              // [G × kTile]

  float* o_s = p_s + G * kTile;                           // [kWarps × G × hd]
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const std::int64_t r = blockIdx.x;
  const int ctx = row_ctx[r];
  const int begin = int(blockIdx.z) * split_keys;
  if (ctx <= 0 || begin >= ctx) return;
  const int end = min(ctx, begin + split_keys);
  const int group = d.n_heads / d.n_kv_heads;
  const int chunks = group / G;
  const int kvh = int(blockIdx.y) / chunks;
  const int h0 = kvh * group + (int(blockIdx.y) % chunks) * G;
  const float scale = rsqrtf(float(hd));
  for (int i = threadIdx.x; i < G * hd; i += kThreads) {
    const int g = i / hd, e = i % hd;
    q_s[i] = q[r * d.q_stride + std::int64_t(h0 + g) * hd + e] * scale;
  }
  const std::int32_t* table = tables + std::int64_t(row_seq[r]) * max_blocks;
  const std::int64_t col = std::int64_t(kvh) * hd;
  float m[G], l[G], acc[G][DL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < DL; ++i) acc[g][i] = 0.f;
  }
  __syncthreads();

  for (int t0 = begin; t0 < end; t0 += kTile) {
    const int j = t0 + int(threadIdx.x);
    const bool live = j < end;
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = -INFINITY;
    if (live) {
      const std::int64_t slot = std::int64_t(table[j / block_size]) * block_size + j % block_size;
      slot_s[threadIdx.x] = slot;
      const KV* kp = k + slot * row + col;
#pragma unroll
      for (int g = 0; g < G; ++g) s[g] = 0.f;
      for (int e = 0; e < hd; ++e) {
        const float ke = load_as_float(kp, e);
#pragma unroll
        for (int g = 0; g < G; ++g) s[g] += q_s[g * hd + e] * ke;
      }
    }
    float tile[G];
#pragma unroll
    for (int g = 0; g < G; ++g) tile[g] = s[g];
    block_reduce<G, true>(tile, red);
    float p[G], corr[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m_new = fmaxf(m[g], tile[g]);
      corr[g] = expf(m[g] - m_new);   // 0 on the first tile (m = −∞)
      p[g] = live ? expf(s[g] - m_new) : 0.f;
      p_s[g * kTile + threadIdx.x] = p[g];
      m[g] = m_new;
    }
    block_reduce<G, false>(p, red);   // also orders the p_s and slot_s writes before the reads below
#pragma unroll
    for (int g = 0; g < G; ++g) {
      l[g] = l[g] * corr[g] + p[g];
#pragma unroll
      for (int i = 0; i < DL; ++i) acc[g][i] *= corr[g];
    }
    const int keys = min(kTile, end - t0);
#pragma unroll 4
    for (int jj = warp; jj < keys; jj += kWarps) {
      const KV* vp = v + slot_s[jj] * row + col;
      float pj[G];
#pragma unroll
      for (int g = 0; g < G; ++g) pj[g] = p_s[g * kTile + jj];
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        const int e = lane + 32 * i;
        if (e < hd) {
          const float ve = load_as_float(vp, e);
#pragma unroll
          for (int g = 0; g < G; ++g) acc[g][i] += pj[g] * ve;
        }
      }
    }
    __syncthreads();  // p_s and slot_s are rewritten by the next tile
  }
  // The warps' partial sums (same max, same l: both block-wide), added in warp order.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int i = 0; i < DL; ++i) {
      const int e = lane + 32 * i;
      if (e < hd) o_s[(warp * G + g) * hd + e] = acc[g][i];
    }
  }
  __syncthreads();

  const std::int64_t out_row = r * std::int64_t(d.n_heads) * hd;
  const std::int64_t splits = gridDim.z;
  for (int x = int(threadIdx.x); x < G * hd; x += kThreads) {
    const int g = x / hd, e = x % hd;
    float o = 0.f, lg = l[0];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += o_s[(w * G + g) * hd + e];
#pragma unroll
    for (int gg = 1; gg < G; ++gg) {
      if (gg == g) lg = l[gg];
    }
    if (splits == 1) {
      out[out_row + std::int64_t(h0 + g) * hd + e] = o / lg;
    } else {
      part_o[((r * d.n_heads + h0 + g) * splits + blockIdx.z) * hd + e] = o;
    }
  }
  if (splits > 1 && threadIdx.x == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const std::int64_t at = (r * d.n_heads + h0 + g) * splits + blockIdx.z;
      part_ml[2 * at] = m[g];
      part_ml[2 * at + 1] = l[g];
    }
  }
}

// One block per (row, head): the splits' partial sums rescaled to their common max.
__global__ void paged_attention_combine_kernel(PagedShape d, const std::int32_t* row_ctx, int splits, int split_keys,
                                               const float* part_o, const float* part_ml, float* out) {
  const std::int64_t r = blockIdx.x;
  const int h = blockIdx.y, hd = d.head_dim;
  const int ctx = row_ctx[r];
  if (ctx <= 0) return;
  const int used = min(splits, (ctx + split_keys - 1) / split_keys);
  const std::int64_t at = (r * d.n_heads + h) * splits;
  float mx = -INFINITY;
  for (int s = 0; s < used; ++s) mx = fmaxf(mx, part_ml[2 * (at + s)]);
  float total = 0.f;
  for (int s = 0; s < used; ++s) total += part_ml[2 * (at + s) + 1] * expf(part_ml[2 * (at + s)] - mx);
  const float inv = 1.f / total;
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float o = 0.f;
    for (int s = 0; s < used; ++s) o += part_o[(at + s) * hd + e] * expf(part_ml[2 * (at + s)] - mx);
    out[(r * d.n_heads + h) * std::int64_t(hd) + e] = o * inv;
  }
}

// Keys per split: at most kMaxSplit, fewer (whole tiles) when rows × heads are too few to
// fill the GPU. A function of (rows, heads, longest context) only, as the scratch size is.
int split_keys_for(std::int64_t n, int n_heads, std::int64_t max_context) {
  const std::int64_t heads = std::max<std::int64_t>(1, n * n_heads);
  const std::int64_t want = (kFillHeads + heads - 1) / heads;           // splits wanted
  std::int64_t keys = (max_context + want - 1) / want;
  keys = (keys + kTile - 1) / kTile * kTile;
  return int(std::min<std::int64_t>(kMaxSplit, std::max<std::int64_t>(kTile, keys)));
}
int splits_for(std::int64_t n, int n_heads, std::int64_t max_context) {
  const int keys = split_keys_for(n, n_heads, max_context);
  return int((max_context + keys - 1) / keys);
}

template <typename KV, int G, int DL>
void launch(cudaStream_t s, const PagedShape& d, std::int64_t n, const float* q, const PagedCache& c,
            const std::int32_t* tables, int max_blocks, const std::int32_t* row_seq, const std::int32_t* row_ctx,
            int splits, int split_keys, float* out, float* part_o, float* part_ml) {
  const dim3 grid(unsigned(n), unsigned(d.n_heads / G), unsigned(splits));
  const std::size_t shared = std::size_t(G) * std::size_t(d.head_dim + kTile) * sizeof(float) +
                             std::size_t(kTile) * sizeof(std::int64_t) +
                             std::size_t(kWarps) * G * std::size_t(d.head_dim) * sizeof(float);
  paged_attention_kernel<KV, G, DL><<<grid, kThreads, shared, s>>>(
      d, q, static_cast<const KV*>(c.k), static_cast<const KV*>(c.v), c.block_size, c.row, tables, max_blocks, row_seq,
      row_ctx, split_keys, out, part_o, part_ml);
}

template <typename KV, int G>
void launch_dims(cudaStream_t s, const PagedShape& d, std::int64_t n, const float* q, const PagedCache& c,
                 const std::int32_t* tables, int max_blocks, const std::int32_t* row_seq, const std::int32_t* row_ctx,
                 int splits, int split_keys, float* out, float* part_o, float* part_ml) {
  if (d.head_dim <= 64) {
    launch<KV, G, 2>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  } else if (d.head_dim <= 128) {
    launch<KV, G, 4>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  } else {
    launch<KV, G, 8>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  }
}

template <typename KV>
void launch_grouped(cudaStream_t s, const PagedShape& d, std::int64_t n, const float* q, const PagedCache& c,
                    const std::int32_t* tables, int max_blocks, const std::int32_t* row_seq,
                    const std::int32_t* row_ctx, int splits, int split_keys, float* out, float* part_o,
                    float* part_ml) {
  // The most query heads of one kv head per block, up to 8.
  const int group = d.n_heads / d.n_kv_heads;
  if (group % 8 == 0) {
    launch_dims<KV, 8>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  } else if (group % 4 == 0) {
    launch_dims<KV, 4>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  } else if (group % 2 == 0) {
    launch_dims<KV, 2>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  } else {
    launch_dims<KV, 1>(s, d, n, q, c, tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml);
  }
}

}  // namespace

void paged_kv_write(cudaStream_t s, std::int64_t n, const float* k_src, const float* v_src, std::int64_t src_stride,
                    const std::int32_t* slots, void* k_dst, void* v_dst, bool bf16, std::int64_t row) {
  if (n <= 0 || row <= 0) return;
  const unsigned blocks = blocks_for(n * row, 256);
  if (bf16) {
    paged_kv_write_kernel<<<blocks, 256, 0, s>>>(n, k_src, v_src, src_stride, slots, static_cast<unsigned short*>(k_dst),
                                                 static_cast<unsigned short*>(v_dst), row);
  } else {
    paged_kv_write_kernel<<<blocks, 256, 0, s>>>(n, k_src, v_src, src_stride, slots, static_cast<float*>(k_dst),
                                                 static_cast<float*>(v_dst), row);
  }
  check_launch("paged_kv_write");
}

std::int64_t paged_attention_scratch(std::int64_t n, int n_heads, int head_dim, std::int64_t max_context) {
  const int splits = splits_for(n, n_heads, max_context);
  return splits <= 1 ? 0 : n * n_heads * std::int64_t(splits) * (head_dim + 2);
}

void paged_attention(cudaStream_t s, const PagedShape& d, std::int64_t n, const float* q, const PagedCache& c,
                     const std::int32_t* block_tables, int max_blocks, const std::int32_t* row_seq,
                     const std::int32_t* row_ctx, std::int64_t max_context, float* out, float* scratch) {
  if (n <= 0 || max_context <= 0) return;
  if (d.head_dim > kMaxHeadDim || d.n_kv_heads <= 0 || d.n_heads % d.n_kv_heads != 0)
    throw std::invalid_argument("paged_attention: head_dim up to " + std::to_string(kMaxHeadDim) +
                                " and n_heads a multiple of n_kv_heads");
  if (n > 0x7fffffff) throw std::invalid_argument("paged_attention: more than 2^31 rows");
  const int split_keys = split_keys_for(n, d.n_heads, max_context);
  const int splits = splits_for(n, d.n_heads, max_context);
  float* part_o = splits > 1 ? scratch : nullptr;
  float* part_ml = splits > 1 ? scratch + n * d.n_heads * std::int64_t(splits) * d.head_dim : nullptr;
  if (c.bf16) {
    launch_grouped<unsigned short>(s, d, n, q, c, block_tables, max_blocks, row_seq, row_ctx, splits, split_keys, out,
                                   part_o, part_ml);
  } else {
    launch_grouped<float>(s, d, n, q, c, block_tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o,
                          part_ml);
  }
  check_launch("paged_attention");
  if (splits > 1) {
    paged_attention_combine_kernel<<<dim3(unsigned(n), unsigned(d.n_heads)), 128, 0, s>>>(d, row_ctx, splits,
                                                                                         split_keys, part_o, part_ml, out);
    check_launch("paged_attention (combine)");
  }
}

}  // namespace braid::backend::cuda
