#include "backend/cuda/flash_attention.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/segments.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kKeys = 64;  // keys of a tile (forward, d_q) or of a block (d_k/d_v): 16 rows a warp there
constexpr int kFwdWarps = 8, kDqWarps = 4, kDkvWarps = 4;  // forward and d_q: 16 queries a warp
constexpr int kPrepThreads = 256;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

struct Args {
  int n_heads, n_kv_heads, group;
  std::int64_t q_stride, kv_stride, out_stride;
  float scale, scale_log2;  // the scores' scale (1/√d unless told), and it times log2(e): they go through exp2
  float softcap;            // 0: none; else scores s -> softcap · tanh(s / softcap)
  std::int64_t window;      // 0: none; else a query at position p sees keys p − window < j <= p
};

// A raw q·k product as a score in log2 units; *dcap = d(capped)/d(scaled) (1 without a cap).
__device__ __forceinline__ float score_log2(const Args& a, float qk, float& dcap) {
  if (a.softcap <= 0.f) {
    dcap = 1.f;
    return qk * a.scale_log2;
  }
  const float t = tanhf(qk * a.scale / a.softcap);
  dcap = 1.f - t * t;
  return a.softcap * t * kLog2e;
}

// The first key a query at position p sees (a sliding window), 0 without one.
__device__ __forceinline__ std::int64_t window_start(const Args& a, std::int64_t p) {
  return a.window > 0 && p >= a.window ? p - a.window + 1 : 0;
}

// The bf16 copies the kernels stream from (flash_attention_*_scratch): rows by padded position
// (q_pad_first + i for queries, k_pad_first + j for keys), zeros on the padding, so that a tile
// is one plain asynchronous copy; lse (log2 units, +inf on the padding) and Σ dO·O (0 there)
// head-major, a tile's 64 values contiguous.
struct Copies {
  __nv_bfloat16 *k, *v, *q, *d_out;
  float *lse2, *dsum;
};

constexpr std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
std::size_t kv_copy_bytes(const AttentionShape& d, std::int64_t k_pad_total) {
  return aligned(std::size_t(k_pad_total) * std::size_t(d.n_kv_heads) * std::size_t(d.head_dim) * 2);
}
std::size_t q_copy_bytes(const AttentionShape& d, std::int64_t q_pad_total) {
  return aligned(std::size_t(q_pad_total) * std::size_t(d.n_heads) * std::size_t(d.head_dim) * 2);
}
std::size_t q_stat_bytes(const AttentionShape& d, std::int64_t q_pad_total) {
  return aligned(std::size_t(q_pad_total) * std::size_t(d.n_heads) * sizeof(float));
}
Copies copies_in(void* scratch, const AttentionShape& d, std::int64_t q_pad_total, std::int64_t k_pad_total,
                 bool backward) {
  auto* p = static_cast<unsigned char*>(scratch);
  Copies c{};
  c.k = reinterpret_cast<__nv_bfloat16*>(p);
  p += kv_copy_bytes(d, k_pad_total);
  c.v = reinterpret_cast<__nv_bfloat16*>(p);
  p += kv_copy_bytes(d, k_pad_total);
  if (!backward) return c;
  c.q = reinterpret_cast<__nv_bfloat16*>(p);
  p += q_copy_bytes(d, q_pad_total);
  c.d_out = reinterpret_cast<__nv_bfloat16*>(p);
  p += q_copy_bytes(d, q_pad_total);
  c.lse2 = reinterpret_cast<float*>(p);
  p += q_stat_bytes(d, q_pad_total);
  c.dsum = reinterpret_cast<float*>(p);
  return c;
}

// ---- the tensor-core primitives (sm_80+) ----------------------------------------------
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8×8 bf16 matrices from shared memory; lane i gives the address of row i % 8 of
// matrix i / 8, and r[j] receives lane's part of matrix j: row lane / 4, columns
// 2·(lane % 4) and +1 (transposed with .trans).
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}

// 16 bytes global -> shared without going through registers (cp.async, sm_80+); a thread's
// copies since its last commit form a group, wait<0> waits for all of its groups. Another
// thread's copies are visible after the wait and a __syncthreads.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_address(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// d += a · b for a 16×16 A (row), a 16×8 B (col), bf16, f32 accumulate. With g = lane / 4 and
// t = lane % 4: a = {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}; b = {(k 2t..2t+1,
// n g), (k 2t+8.., n g)}; d = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // lo in the low half: the lower column
  unsigned u;
  std::memcpy(&u, &v, 4);
  return u;
}

// Two accumulator tiles of 16×8 (columns 16kk .. 16kk+15) as the A operand of the next product:
// the accumulator layout of columns 2t, 2t+1 is the A layout of k 2t, 2t+1.
__device__ __forceinline__ void accumulators_as_a(unsigned (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_bf16x2(lo[0], lo[1]);
  a[1] = pack_bf16x2(lo[2], lo[3]);
  a[2] = pack_bf16x2(hi[0], hi[1]);
  a[3] = pack_bf16x2(hi[2], hi[3]);
}

// Shared-memory addresses of the ldmatrix lanes for a tile stored row-major with row
// stride kLds (elements), at (row0, col0):
//   as_a: the 16×16 A operand (rows row0.., k col0..);
//   as_b: two 8-wide n-tiles of a B operand whose n runs along the stored rows (B = Mᵀ):
//         r[0], r[1] = b0, b1 of rows row0..+7; r[2], r[3] of rows row0+8..+15;
//   as_b_trans (with ldsm_x4_trans): two n-tiles of a B operand whose k runs along the
//         stored rows (B = M): r[0], r[1] = b0, b1 of columns col0..+7; r[2], r[3] of col0+8..
template <int kLds>
__device__ __forceinline__ const __nv_bfloat16* as_a(const __nv_bfloat16* m, int row0, int col0, int lane) {
  return m + (row0 + (lane & 15)) * kLds + col0 + (lane >> 4) * 8;
}
template <int kLds>
__device__ __forceinline__ const __nv_bfloat16* as_b(const __nv_bfloat16* m, int row0, int col0, int lane) {
  return m + (row0 + (lane & 7) + ((lane >> 4) << 3)) * kLds + col0 + ((lane >> 3) & 1) * 8;
}
template <int kLds>
__device__ __forceinline__ const __nv_bfloat16* as_b_trans(const __nv_bfloat16* m, int row0, int col0, int lane) {
  return m + (row0 + (lane & 7) + (((lane >> 3) & 1) << 3)) * kLds + col0 + (lane >> 4) * 8;
}

// d0, d1 += a · the two n-tiles of B at (row0, col0) of the stored tile m: B = Mᵀ (as_b), or
// with kTrans B = M (as_b_trans).
template <int kLds, bool kTrans = false>
__device__ __forceinline__ void mma_b(float (&d0)[4], float (&d1)[4], const unsigned (&a)[4],
                                      const __nv_bfloat16* m, int row0, int col0, int lane) {
  unsigned b[4];
  if constexpr (kTrans) {
    ldsm_x4_trans(b, as_b_trans<kLds>(m, row0, col0, lane));
  } else {
    ldsm_x4(b, as_b<kLds>(m, row0, col0, lane));
  }
  mma(d0, a, b[0], b[1]);
  mma(d1, a, b[2], b[3]);
}

// kRows rows of kHd f32 (row stride `stride` elements) into bf16 shared memory (row stride
// kHd + 8: rows 16 bytes apart in the banks, so ldmatrix does not conflict); rows at or past
// `valid` are zeros and their memory is not read. Synchronous: the forward's query tile, once
// a block.
template <int kRows, int kHd, int kThreads>
__device__ __forceinline__ void stage(__nv_bfloat16* dst, const float* src, std::int64_t stride, int valid) {
  constexpr int kLds = kHd + 8, kVec = kHd / 4, kN = kRows * kVec;
  static_assert(kN % kThreads == 0, "whole rounds");
  float4 v[kN / kThreads];  // every load in flight before the first store
#pragma unroll
  for (int c = 0; c < kN / kThreads; ++c) {
    const int i = int(threadIdx.x) + c * kThreads, r = i / kVec, col = (i % kVec) * 4;
    v[c] = r < valid ? __ldg(reinterpret_cast<const float4*>(src + r * stride + col)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int c = 0; c < kN / kThreads; ++c) {
    const int i = int(threadIdx.x) + c * kThreads, r = i / kVec, col = (i % kVec) * 4;
    uint2 o;
    o.x = pack_bf16x2(v[c].x, v[c].y);
    o.y = pack_bf16x2(v[c].z, v[c].w);
    *reinterpret_cast<uint2*>(dst + r * kLds + col) = o;
  }
}

// kRows rows of kHd bf16 of a copy (row stride `stride` elements, under 2^24) into a padded
// shared tile, asynchronously (the caller commits).
template <int kRows, int kHd, int kThreads>
__device__ __forceinline__ void load_async(__nv_bfloat16* dst, const __nv_bfloat16* src, std::int64_t stride) {
  constexpr int kLds = kHd + 8, kChunks = kHd / 8, kN = kRows * kChunks;
  static_assert(kN % kThreads == 0, "whole rounds");
#pragma unroll
  for (int c = 0; c < kN / kThreads; ++c) {
    const int i = int(threadIdx.x) + c * kThreads, r = i / kChunks, col = (i % kChunks) * 8;
    cp_async16(dst + r * kLds + col, src + (r * int(stride) + col));  // 32-bit offsets: fewer registers
  }
}

// v clamped to [lo, hi], as an int: tile-relative bounds of the causal mask.
__device__ __forceinline__ int clamp_to(std::int64_t v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : int(v);
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- the bf16 copies ------------------------------------------------------------------
// K and V by padded key position: a thread converts 4 values (n_kv_heads · head_dim a row).
__global__ void __launch_bounds__(kPrepThreads) kv_copy_kernel(Args a, int head_dim, const DeviceSegment* segs,
                                                               int n_segs, std::int64_t k_pad_total, const float* k,
                                                               const float* v, __nv_bfloat16* kc, __nv_bfloat16* vc) {
  const std::int64_t row_vec = std::int64_t(a.n_kv_heads) * head_dim / 4;
  const std::int64_t i = blockIdx.x * std::int64_t(kPrepThreads) + threadIdx.x;
  if (i >= k_pad_total * row_vec) return;
  const std::int64_t pos = i / row_vec, col = (i % row_vec) * 4;
  const DeviceSegment& sg = segment_at<&DeviceSegment::k_pad_first>(segs, n_segs, pos);
  const std::int64_t j = pos - sg.k_pad_first;
  float4 x = make_float4(0.f, 0.f, 0.f, 0.f), y = x;
  if (j < sg.past + sg.q_len) {
    const std::int64_t off = (sg.kv_begin + j) * a.kv_stride + col;
    x = __ldg(reinterpret_cast<const float4*>(k + off));
    y = __ldg(reinterpret_cast<const float4*>(v + off));
  }
  const std::int64_t dst = pos * row_vec * 4 + col;
  *reinterpret_cast<uint2*>(kc + dst) = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
  *reinterpret_cast<uint2*>(vc + dst) = make_uint2(pack_bf16x2(y.x, y.y), pack_bf16x2(y.z, y.w));
}

// The backward's per-query part: a warp per (padded query position, head) writes the bf16
// rows of q and dO, lse in log2 units and Σ dO·O (as the exact backward's scratch).
__global__ void __launch_bounds__(kPrepThreads) q_copy_kernel(Args a, int head_dim, const DeviceSegment* segs,
                                                              int n_segs, std::int64_t q_pad_total, const float* q,
                                                              const float* out, const float* lse, const float* d_out,
                                                              Copies c) {
  const std::int64_t w = blockIdx.x * std::int64_t(kPrepThreads / 32) + (threadIdx.x >> 5);
  if (w >= q_pad_total * a.n_heads) return;
  const std::int64_t pos = w / a.n_heads;
  const int h = int(w % a.n_heads), lane = int(threadIdx.x) & 31;
  const DeviceSegment& sg = segment_at<&DeviceSegment::q_pad_first>(segs, n_segs, pos);
  const std::int64_t i = pos - sg.q_pad_first, row = sg.q_begin + i;
  const bool valid = i < sg.q_len;
  const std::int64_t dst = (pos * a.n_heads + h) * head_dim;
  float s = 0.f;
  for (int col = 2 * lane; col < head_dim; col += 64) {
    float2 x = make_float2(0.f, 0.f), o = x, d = x;
    if (valid) {
      x = *reinterpret_cast<const float2*>(q + row * a.q_stride + std::int64_t(h) * head_dim + col);
      o = *reinterpret_cast<const float2*>(out + row * a.out_stride + std::int64_t(h) * head_dim + col);
      d = *reinterpret_cast<const float2*>(d_out + row * a.out_stride + std::int64_t(h) * head_dim + col);
    }
    s += o.x * d.x + o.y * d.y;
    *reinterpret_cast<unsigned*>(c.q + dst + col) = pack_bf16x2(x.x, x.y);
    *reinterpret_cast<unsigned*>(c.d_out + dst + col) = pack_bf16x2(d.x, d.y);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) {
    c.lse2[std::int64_t(h) * q_pad_total + pos] = valid ? lse[row * a.n_heads + h] * kLog2e : INFINITY;
    c.dsum[std::int64_t(h) * q_pad_total + pos] = s;
  }
}

// ---- forward ------------------------------------------------------------------------------
// A block: 16·kWarps queries of head h (16 rows a warp), the key tiles double-buffered: tile
// jb + 1 is copied (cp.async) while tile jb is multiplied, one __syncthreads a tile.
template <int kHd, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, kHd == 64 ? 2 : 1)
    forward_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t tiles, const float* q,
                   const __nv_bfloat16* kc, const __nv_bfloat16* vc, float* out, float* lse) {
  constexpr int kThreads = kWarps * 32, kRows = kWarps * 16;
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kKeys / 8, kDt = kHd / 8, kBuf = kKeys * kLds;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sK = sQ + kRows * kLds;  // [2][kKeys][kLds]
  __nv_bfloat16* sV = sK + 2 * kBuf;      // [2][kKeys][kLds]

  const std::int64_t pos = (tiles - 1 - std::int64_t(blockIdx.x)) * kRows;  // the longest rows first
  const int h = int(blockIdx.y);
  const DeviceSegment& sg = segment_at<&DeviceSegment::q_pad_first>(segs, n_segs, pos);
  const std::int64_t i0 = pos - sg.q_pad_first;
  if (i0 >= sg.q_len) return;  // padding: the whole block leaves
  const int nq = int(sg.q_len - i0 < kRows ? sg.q_len - i0 : kRows);
  const std::int64_t past = sg.past, n_keys = past + i0 + nq;
  const std::int64_t kv_row = std::int64_t(a.n_kv_heads) * kHd;  // the copies' row stride
  const std::int64_t kv0 = sg.k_pad_first * kv_row + std::int64_t(h / a.group) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const int blocks = int((n_keys + kKeys - 1) / kKeys);
  // The tiles this warp multiplies: up to its last row's last key; none when all its rows are
  // past the segment (tiles wholly above the diagonal are skipped).
  const int wrow = warp * 16;
  const int warp_blocks = wrow < nq ? int((past + i0 + (wrow + 15 < nq ? wrow + 15 : nq - 1)) / kKeys) + 1 : 0;
  // With a sliding window, the tiles before the block's (the warp's) first row's first key
  // are skipped too.
  const int first_block = int(window_start(a, past + i0) / kKeys);
  const int warp_first = int(window_start(a, past + i0 + wrow) / kKeys);

  load_async<kKeys, kHd, kThreads>(sK + (first_block & 1) * kBuf, kc + kv0 + std::int64_t(first_block) * kKeys * kv_row,
                                   kv_row);
  load_async<kKeys, kHd, kThreads>(sV + (first_block & 1) * kBuf, vc + kv0 + std::int64_t(first_block) * kKeys * kv_row,
                                   kv_row);
  cp_async_commit();
  stage<kRows, kHd, kThreads>(sQ, q + (sg.q_begin + i0) * a.q_stride + std::int64_t(h) * kHd, a.q_stride, nq);
  __syncthreads();
  unsigned qf[kKt][4];
#pragma unroll
  for (int kt = 0; kt < kKt; ++kt) ldsm_x4(qf[kt], as_a<kLds>(sQ, wrow, kt * 16, lane));

  float o[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows g and g + 8 of the warp (log2 units)
  const std::int64_t last = past + i0 + wrow + g;  // the last key row g sees (row g + 8: 8 more)
  for (int jb = first_block; jb < blocks; ++jb) {
    // Tile jb has landed (this thread's copies, then everyone's), and every warp is done
    // with tile jb - 1, whose buffer the next copy takes.
    cp_async_wait_all();
    __syncthreads();
    if (jb + 1 < blocks) {
      const std::int64_t next = kv0 + std::int64_t(jb + 1) * kKeys * kv_row;
      load_async<kKeys, kHd, kThreads>(sK + ((jb + 1) & 1) * kBuf, kc + next, kv_row);
      load_async<kKeys, kHd, kThreads>(sV + ((jb + 1) & 1) * kBuf, vc + next, kv_row);
    }
    cp_async_commit();
    if (jb >= warp_blocks || jb < warp_first) continue;
    const __nv_bfloat16* cK = sK + (jb & 1) * kBuf;
    const __nv_bfloat16* cV = sV + (jb & 1) * kBuf;
    const std::int64_t j0 = std::int64_t(jb) * kKeys;
    const int lim0 = clamp_to(last - j0, -1, kKeys), lim1 = clamp_to(last + 8 - j0, -1, kKeys);
    // Keys before low0 (low1) are out of row g's (g + 8's) window.
    const int low0 = clamp_to(window_start(a, last) - j0, 0, kKeys), low1 = clamp_to(window_start(a, last + 8) - j0, 0, kKeys);

    float sc[kNt][4];
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
    for (int kt = 0; kt < kKt; ++kt) {
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        mma_b<kLds>(sc[2 * np], sc[2 * np + 1], qf[kt], cK, np * 16, kt * 16, lane);
      }
    }
    // Scale into log2 units; mask keys past a row's last only in tiles that reach past the
    // warp's first row's (rows past the segment see zero keys and are never written).
    const bool crosses = j0 + kKeys - 1 > past + i0 + wrow;
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float dcap;
        float x = score_log2(a, sc[nt][e], dcap);
        const int col = nt * 8 + 2 * t + (e & 1);
        if (crosses && col > (e < 2 ? lim0 : lim1)) x = -INFINITY;
        if (col < (e < 2 ? low0 : low1)) x = -INFINITY;
        sc[nt][e] = x;
      }
      mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
    }
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    // Without a window key 0 is seen by every row, so a row's maximum is finite from the first
    // tile on; with one, a row may see no key of a tile: the guard keeps exp2(-inf - -inf) out.
    const float base0 = mx0 == -INFINITY ? 0.f : mx0, base1 = mx1 == -INFINITY ? 0.f : mx1;
    const float c0 = exp2f(m0 - base0), c1 = exp2f(m1 - base1);
    m0 = mx0;
    m1 = mx1;
    l0 *= c0;
    l1 *= c1;
#pragma unroll
    for (int dt = 0; dt < kDt; ++dt) {
      o[dt][0] *= c0;
      o[dt][1] *= c0;
      o[dt][2] *= c1;
      o[dt][3] *= c1;
    }
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      sc[nt][0] = exp2f(sc[nt][0] - base0);
      sc[nt][1] = exp2f(sc[nt][1] - base0);
      sc[nt][2] = exp2f(sc[nt][2] - base1);
      sc[nt][3] = exp2f(sc[nt][3] - base1);
      l0 += sc[nt][0] + sc[nt][1];
      l1 += sc[nt][2] + sc[nt][3];
    }
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk) {
      unsigned pa[4];
      accumulators_as_a(pa, sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < kHd / 16; ++dp) {
        mma_b<kLds, true>(o[2 * dp], o[2 * dp + 1], pa, cV, kk * 16, dp * 16, lane);
      }
    }
  }
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wrow + g + 8 * half;
    if (r >= nq) continue;
    const float l = half ? l1 : l0, m = half ? m1 : m0, inv = 1.f / l;
    const std::int64_t row = sg.q_begin + i0 + r;
    float* orow = out + row * a.out_stride + std::int64_t(h) * kHd + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDt; ++dt) {
      *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
    }
    if (t == 0) lse[row * a.n_heads + h] = (m + log2f(l)) * kLn2;
  }
}

// ---- backward: d_q ----------------------------------------------------------------------
// A block: 16·kWarps queries of head h. Per key tile: S = Q·Kᵀ, P = exp(S − lse), dP = dO·Vᵀ,
// dS = P∘(dP − Σ dO·O), d_q += dS·K. The key tiles double-buffered as in the forward.
template <int kHd, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    dq_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t tiles, std::int64_t q_pad_total,
              Copies c, float* d_q) {
  constexpr int kThreads = kWarps * 32, kRows = kWarps * 16;
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kKeys / 8, kDt = kHd / 8, kBuf = kKeys * kLds;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sDO = sQ + kRows * kLds;
  __nv_bfloat16* sK = sDO + kRows * kLds;  // [2][kKeys][kLds]
  __nv_bfloat16* sV = sK + 2 * kBuf;       // [2][kKeys][kLds]

  const std::int64_t pos = (tiles - 1 - std::int64_t(blockIdx.x)) * kRows;
  const int h = int(blockIdx.y);
  const DeviceSegment& sg = segment_at<&DeviceSegment::q_pad_first>(segs, n_segs, pos);
  const std::int64_t i0 = pos - sg.q_pad_first;
  if (i0 >= sg.q_len) return;
  const int nq = int(sg.q_len - i0 < kRows ? sg.q_len - i0 : kRows);
  const std::int64_t past = sg.past, n_keys = past + i0 + nq;
  const std::int64_t kv_row = std::int64_t(a.n_kv_heads) * kHd, q_row = std::int64_t(a.n_heads) * kHd;
  const std::int64_t kv0 = sg.k_pad_first * kv_row + std::int64_t(h / a.group) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const int blocks = int((n_keys + kKeys - 1) / kKeys);
  const int wrow = warp * 16;
  const int warp_blocks = wrow < nq ? int((past + i0 + (wrow + 15 < nq ? wrow + 15 : nq - 1)) / kKeys) + 1 : 0;
  const int first_block = int(window_start(a, past + i0) / kKeys);
  const int warp_first = int(window_start(a, past + i0 + wrow) / kKeys);

  // The query rows (zeros past the segment in the copies) with the first key tile, one group.
  const std::int64_t q0 = pos * q_row + std::int64_t(h) * kHd;
  load_async<kRows, kHd, kThreads>(sQ, c.q + q0, q_row);
  load_async<kRows, kHd, kThreads>(sDO, c.d_out + q0, q_row);
  load_async<kKeys, kHd, kThreads>(sK + (first_block & 1) * kBuf, c.k + kv0 + std::int64_t(first_block) * kKeys * kv_row,
                                   kv_row);
  load_async<kKeys, kHd, kThreads>(sV + (first_block & 1) * kBuf, c.v + kv0 + std::int64_t(first_block) * kKeys * kv_row,
                                   kv_row);
  cp_async_commit();
  // Rows g and g + 8 of the warp: lse in log2 units (+inf past the segment: P = 0) and Σ dO·O.
  float lse2[2], dd[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t at = std::int64_t(h) * q_pad_total + pos + wrow + g + 8 * half;
    lse2[half] = c.lse2[at];
    dd[half] = c.dsum[at];
  }

  float dq[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;
  const std::int64_t last = past + i0 + wrow + g;
  for (int jb = first_block; jb < blocks; ++jb) {
    cp_async_wait_all();
    __syncthreads();
    if (jb + 1 < blocks) {
      const std::int64_t next = kv0 + std::int64_t(jb + 1) * kKeys * kv_row;
      load_async<kKeys, kHd, kThreads>(sK + ((jb + 1) & 1) * kBuf, c.k + next, kv_row);
      load_async<kKeys, kHd, kThreads>(sV + ((jb + 1) & 1) * kBuf, c.v + next, kv_row);
    }
    cp_async_commit();
    if (jb >= warp_blocks || jb < warp_first) continue;
    const __nv_bfloat16* cK = sK + (jb & 1) * kBuf;
    const __nv_bfloat16* cV = sV + (jb & 1) * kBuf;
    const std::int64_t j0 = std::int64_t(jb) * kKeys;
    const int lim0 = clamp_to(last - j0, -1, kKeys), lim1 = clamp_to(last + 8 - j0, -1, kKeys);
    const int low0 = clamp_to(window_start(a, last) - j0, 0, kKeys), low1 = clamp_to(window_start(a, last + 8) - j0, 0, kKeys);

    float sc[kNt][4], dp[kNt][4];
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[nt][e] = dp[nt][e] = 0.f;
    }
#pragma unroll
    for (int kt = 0; kt < kKt; ++kt) {
      unsigned qa[4], da[4];
      ldsm_x4(qa, as_a<kLds>(sQ, wrow, kt * 16, lane));
      ldsm_x4(da, as_a<kLds>(sDO, wrow, kt * 16, lane));
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        mma_b<kLds>(sc[2 * np], sc[2 * np + 1], qa, cK, np * 16, kt * 16, lane);
        mma_b<kLds>(dp[2 * np], dp[2 * np + 1], da, cV, np * 16, kt * 16, lane);
      }
    }
    const bool crosses = j0 + kKeys - 1 > past + i0 + wrow;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1, col = nt * 8 + 2 * t + (e & 1);
        float dcap;
        float p = exp2f(score_log2(a, sc[nt][e], dcap) - lse2[half]);
        if (crosses && col > (half ? lim1 : lim0)) p = 0.f;
        if (col < (half ? low1 : low0)) p = 0.f;
        sc[nt][e] = p * (dp[nt][e] - dd[half]) * dcap;  // dS (of the scaled, uncapped scores)
      }
    }
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk) {
      unsigned sa[4];
      accumulators_as_a(sa, sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
      for (int dpi = 0; dpi < kHd / 16; ++dpi) {
        mma_b<kLds, true>(dq[2 * dpi], dq[2 * dpi + 1], sa, cK, kk * 16, dpi * 16, lane);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wrow + g + 8 * half;
    if (r >= nq) continue;
    float* row = d_q + (sg.q_begin + i0 + r) * a.q_stride + std::int64_t(h) * kHd + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDt; ++dt) {
      *reinterpret_cast<float2*>(row + dt * 8) = make_float2(dq[dt][2 * half] * a.scale, dq[dt][2 * half + 1] * a.scale);
    }
  }
}

// ---- backward: d_k, d_v -------------------------------------------------------------------
// A block: 64 keys of kv head gk, each warp 16 of them, over every head of the group and every
// query tile of kBq that sees them. Per query tile: Sᵀ = K·Qᵀ, Pᵀ, dPᵀ = V·dOᵀ,
// dSᵀ = Pᵀ∘(dPᵀ − Σ dO·O), d_v += Pᵀ·dO, d_k += dSᵀ·Q. The (head, query tile) steps are
// double-buffered: the next one's q, dO, lse and Σ dO·O are copied while this one multiplies.
template <int kHd, int kBq>
__global__ void __launch_bounds__(kDkvWarps * 32)
    dkv_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t q_pad_total, Copies c, float* d_k,
               float* d_v) {
  constexpr int kThreads = kDkvWarps * 32;
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kBq / 8, kDt = kHd / 8, kBuf = kBq * kLds;
  static_assert(kDkvWarps * 16 == kKeys, "a warp per 16 keys");
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sK = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sV = sK + kKeys * kLds;
  __nv_bfloat16* sQ = sV + kKeys * kLds;  // [2][kBq][kLds]
  __nv_bfloat16* sDO = sQ + 2 * kBuf;     // [2][kBq][kLds]
  auto* sL = reinterpret_cast<float*>(sDO + 2 * kBuf);  // [2][kBq]: lse of the tile's queries, log2 units
  float* sD = sL + 2 * kBq;                             // [2][kBq]: Σ dO·O of the tile's queries

  const std::int64_t pos = std::int64_t(blockIdx.x) * kKeys;  // the first keys (the most queries) first
  const int gk = int(blockIdx.y);
  const DeviceSegment& sg = segment_at<&DeviceSegment::k_pad_first>(segs, n_segs, pos);
  const std::int64_t j0 = pos - sg.k_pad_first, past = sg.past, n_keys = past + sg.q_len;
  if (j0 >= n_keys || sg.q_len == 0) return;  // padding, or keys no query of the segment sees
  const int nk = int(n_keys - j0 < kKeys ? n_keys - j0 : kKeys);
  const std::int64_t kv_row = std::int64_t(a.n_kv_heads) * kHd, q_row = std::int64_t(a.n_heads) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;

  const std::int64_t key = j0 + warp * 16 + g;  // this thread's key rows: key and key + 8
  const std::int64_t first_q = j0 > past ? j0 - past : 0;  // the first query that sees key j0
  // The last query that sees the block's last key: the segment's, or that key's window's.
  std::int64_t q_end = sg.q_len;
  if (a.window > 0) q_end = min(q_end, max(first_q + 1, j0 + nk - 1 + a.window - past));
  const std::int64_t qb_begin = first_q / kBq, qb_end = (q_end + kBq - 1) / kBq;
  const int n_qb = int(qb_end - qb_begin), steps = a.group * n_qb;  // (head, query tile) steps, ≥ 1
  // Step s: head gk·group + s / n_qb, query tile qb_begin + s % n_qb; its q, dO, lse and Σ dO·O
  // into buffer s & 1.
  auto load_step = [&](int s) {
    const int h = gk * a.group + s / n_qb, b = s & 1;
    const std::int64_t qpos = sg.q_pad_first + (qb_begin + s % n_qb) * kBq;
    const std::int64_t q0 = qpos * q_row + std::int64_t(h) * kHd;
    load_async<kBq, kHd, kThreads>(sQ + b * kBuf, c.q + q0, q_row);
    load_async<kBq, kHd, kThreads>(sDO + b * kBuf, c.d_out + q0, q_row);
    const int i = int(threadIdx.x);
    const std::int64_t at = std::int64_t(h) * q_pad_total + qpos;
    if (i < kBq / 4) cp_async16(sL + b * kBq + 4 * i, c.lse2 + at + 4 * i);
    else if (i < kBq / 2) cp_async16(sD + b * kBq + 4 * (i - kBq / 4), c.dsum + at + 4 * (i - kBq / 4));
  };
  const std::int64_t kv0 = (sg.k_pad_first + j0) * kv_row + std::int64_t(gk) * kHd;
  load_async<kKeys, kHd, kThreads>(sK, c.k + kv0, kv_row);
  load_async<kKeys, kHd, kThreads>(sV, c.v + kv0, kv_row);
  load_step(0);
  cp_async_commit();

  float dk[kDt][4], dv[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;
  }
  for (int s = 0; s < steps; ++s) {
    // Step s has landed, and every warp is done with step s - 1, whose buffer the next takes.
    cp_async_wait_all();
    __syncthreads();
    if (s + 1 < steps) load_step(s + 1);
    cp_async_commit();
    const std::int64_t i0 = (qb_begin + s % n_qb) * kBq;
    // Query tiles wholly before the warp's first key add nothing, nor (a sliding window) those
    // wholly past its last key's window.
    if (j0 + warp * 16 - past > i0 + kBq - 1) continue;
    if (a.window > 0 && past + i0 >= j0 + warp * 16 + 15 + a.window) continue;
    const int b = s & 1;
    const __nv_bfloat16* cQ = sQ + b * kBuf;
    const __nv_bfloat16* cDO = sDO + b * kBuf;
    const float* cL = sL + b * kBq;
    const float* cD = sD + b * kBq;

    float st[kNt][4], dpt[kNt][4];
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.f;
    }
#pragma unroll
    for (int kt = 0; kt < kKt; ++kt) {
      unsigned ka[4], va[4];
      ldsm_x4(ka, as_a<kLds>(sK, warp * 16, kt * 16, lane));
      ldsm_x4(va, as_a<kLds>(sV, warp * 16, kt * 16, lane));
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        mma_b<kLds>(st[2 * np], st[2 * np + 1], ka, cQ, np * 16, kt * 16, lane);
        mma_b<kLds>(dpt[2 * np], dpt[2 * np + 1], va, cDO, np * 16, kt * 16, lane);
      }
    }
    // A key row is masked for the queries before it (key > past + query); only tiles where
    // the warp's last key passes the tile's first query need the test.
    const bool crosses = j0 + warp * 16 + 15 > past + i0;
    // Query columns before rel0 (rel1) do not see key row g (g + 8); with a sliding window,
    // neither do those from end0 (end1) on.
    const int rel0 = clamp_to(key - past - i0, -1, kBq + 1), rel1 = clamp_to(key + 8 - past - i0, -1, kBq + 1);
    const int end0 = a.window > 0 ? clamp_to(key + a.window - past - i0, -1, kBq + 1) : kBq + 1;
    const int end1 = a.window > 0 ? clamp_to(key + 8 + a.window - past - i0, -1, kBq + 1) : kBq + 1;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        float dcap;
        float p = exp2f(score_log2(a, st[nt][e], dcap) - cL[col]);
        if (crosses && col < (e < 2 ? rel0 : rel1)) p = 0.f;
        if (col >= (e < 2 ? end0 : end1)) p = 0.f;
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - cD[col]) * dcap;  // dSᵀ (of the scaled, uncapped scores)
      }
    }
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk) {
      unsigned pa[4], sa[4];
      accumulators_as_a(pa, st[2 * kk], st[2 * kk + 1]);
      accumulators_as_a(sa, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
      for (int dpi = 0; dpi < kHd / 16; ++dpi) {
        mma_b<kLds, true>(dv[2 * dpi], dv[2 * dpi + 1], pa, cDO, kk * 16, dpi * 16, lane);
        mma_b<kLds, true>(dk[2 * dpi], dk[2 * dpi + 1], sa, cQ, kk * 16, dpi * 16, lane);
      }
    }
  }
  const std::int64_t out0 = (sg.kv_begin + j0) * a.kv_stride + std::int64_t(gk) * kHd;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
    if (r >= nk) continue;
    const std::int64_t off = out0 + std::int64_t(r) * a.kv_stride + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDt; ++dt) {
      float2* pk = reinterpret_cast<float2*>(d_k + off + dt * 8);
      float2* pv = reinterpret_cast<float2*>(d_v + off + dt * 8);
      const float2 ok = *pk, ov = *pv;
      *pk = make_float2(ok.x + dk[dt][2 * half] * a.scale, ok.y + dk[dt][2 * half + 1] * a.scale);
      *pv = make_float2(ov.x + dv[dt][2 * half], ov.y + dv[dt][2 * half + 1]);
    }
  }
}

// ---- launchers --------------------------------------------------------------------------
Args args_of(const AttentionShape& d) {
  const double scale = d.scale > 0 ? d.scale : 1.0 / std::sqrt(double(d.head_dim));
  const double scale_log2 = d.scale > 0 ? kLog2e * d.scale : kLog2e / std::sqrt(double(d.head_dim));
  return {d.n_heads,     d.n_kv_heads,       d.n_heads / d.n_kv_heads, d.q_stride,  d.kv_stride,
          std::int64_t(d.n_heads) * d.head_dim, float(scale), float(scale_log2), float(d.softcap), d.window};
}

constexpr std::size_t lds_bytes(int hd, int rows) { return std::size_t(rows) * std::size_t(hd + 8) * 2; }
// Queries (16 a warp) plus two buffers of K and V.
template <int kHd> constexpr std::size_t forward_smem() {
  return lds_bytes(kHd, 16 * kFwdWarps) + 4 * lds_bytes(kHd, kKeys);
}
template <int kHd> constexpr std::size_t dq_smem() {
  return 2 * lds_bytes(kHd, 16 * kDqWarps) + 4 * lds_bytes(kHd, kKeys);
}
template <int kHd, int kBq> constexpr std::size_t dkv_smem() {
  return 2 * lds_bytes(kHd, kKeys) + 4 * lds_bytes(kHd, kBq) + 4 * std::size_t(kBq) * sizeof(float);
}
// The query tile of the d_k/d_v kernel: smaller at head_dim 128, where d_k and d_v take 128
// registers a thread.
template <int kHd> constexpr int dkv_queries() { return kHd == 128 ? 32 : 64; }

unsigned grid_x(std::int64_t tiles, const char* op) {
  if (tiles > 0x7fffffff) throw std::invalid_argument(std::string(op) + ": batch too large for one launch");
  return unsigned(tiles);
}

template <typename Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, const char* op) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), op);
}

void copy_kv(cudaStream_t s, const Args& a, int head_dim, const DeviceSegment* segs, int n_segs,
             std::int64_t k_pad_total, const float* k, const float* v, const Copies& c, const char* op) {
  const std::int64_t threads = k_pad_total * a.n_kv_heads * head_dim / 4;
  kv_copy_kernel<<<grid_x((threads + kPrepThreads - 1) / kPrepThreads, op), kPrepThreads, 0, s>>>(
      a, head_dim, segs, n_segs, k_pad_total, k, v, c.k, c.v);
  check_launch(op);
}

template <int kHd>
void forward_for(cudaStream_t s, const Args& a, const DeviceSegment* segs, int n_segs, std::int64_t q_pad_total,
                 const float* q, const Copies& c, float* out, float* lse) {
  constexpr std::size_t smem = forward_smem<kHd>();
  allow_smem(forward_kernel<kHd, kFwdWarps>, smem, "attention_forward (flash)");
  const std::int64_t tiles = q_pad_total / (16 * kFwdWarps);
  forward_kernel<kHd, kFwdWarps>
      <<<dim3(grid_x(tiles, "attention_forward"), unsigned(a.n_heads)), kFwdWarps * 32, smem, s>>>(
          a, segs, n_segs, tiles, q, c.k, c.v, out, lse);
  check_launch("attention_forward (flash)");
}

template <int kHd>
void backward_for(cudaStream_t s, const Args& a, const DeviceSegment* segs, int n_segs, std::int64_t q_pad_total,
                  std::int64_t k_pad_total, const Copies& c, float* d_q, float* d_k, float* d_v) {
  constexpr std::size_t smem_q = dq_smem<kHd>();
  allow_smem(dq_kernel<kHd, kDqWarps>, smem_q, "attention_backward (flash d_q)");
  const std::int64_t q_tiles = q_pad_total / (16 * kDqWarps);
  dq_kernel<kHd, kDqWarps>
      <<<dim3(grid_x(q_tiles, "attention_backward"), unsigned(a.n_heads)), kDqWarps * 32, smem_q, s>>>(
          a, segs, n_segs, q_tiles, q_pad_total, c, d_q);
  check_launch("attention_backward (flash d_q)");
  constexpr int kBq = dkv_queries<kHd>();
  constexpr std::size_t smem_kv = dkv_smem<kHd, kBq>();
  allow_smem(dkv_kernel<kHd, kBq>, smem_kv, "attention_backward (flash d_k, d_v)");
  dkv_kernel<kHd, kBq>
      <<<dim3(grid_x(k_pad_total / kKeys, "attention_backward"), unsigned(a.n_kv_heads)), kDkvWarps * 32, smem_kv,
         s>>>(a, segs, n_segs, q_pad_total, c, d_k, d_v);
  check_launch("attention_backward (flash d_k, d_v)");
}

}  // namespace

bool flash_attention_supports(const AttentionShape& d, std::initializer_list<const void*> pointers) {
  if (d.head_dim != 64 && d.head_dim != 128) return false;
  if (d.n_kv_heads <= 0 || d.n_heads <= 0 || d.n_heads % d.n_kv_heads != 0 || d.n_heads > 65535) return false;
  if (d.q_stride % 4 != 0 || d.kv_stride % 4 != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

std::size_t flash_attention_forward_scratch(const AttentionShape& d, std::int64_t k_pad_total) {
  return 2 * kv_copy_bytes(d, k_pad_total);
}

std::size_t flash_attention_backward_scratch(const AttentionShape& d, std::int64_t q_pad_total,
                                             std::int64_t k_pad_total) {
  return 2 * kv_copy_bytes(d, k_pad_total) + 2 * q_copy_bytes(d, q_pad_total) + 2 * q_stat_bytes(d, q_pad_total);
}

void flash_attention_forward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                             std::int64_t q_pad_total, std::int64_t k_pad_total, const float* q, const float* k,
                             const float* v, float* out, float* lse, void* scratch) {
  if (q_pad_total <= 0) return;
  const Args a = args_of(d);
  const Copies c = copies_in(scratch, d, q_pad_total, k_pad_total, false);
  copy_kv(s, a, d.head_dim, segs, n_segs, k_pad_total, k, v, c, "attention_forward (flash, bf16 k and v)");
  if (d.head_dim == 64) forward_for<64>(s, a, segs, n_segs, q_pad_total, q, c, out, lse);
  else forward_for<128>(s, a, segs, n_segs, q_pad_total, q, c, out, lse);
}

void flash_attention_backward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                              std::int64_t total_q, std::int64_t q_pad_total, std::int64_t k_pad_total,
                              const float* q, const float* k, const float* v, const float* out, const float* lse,
                              const float* d_out, float* d_q, float* d_k, float* d_v, void* scratch) {
  if (total_q <= 0) return;
  const Args a = args_of(d);
  const Copies c = copies_in(scratch, d, q_pad_total, k_pad_total, true);
  copy_kv(s, a, d.head_dim, segs, n_segs, k_pad_total, k, v, c, "attention_backward (flash, bf16 k and v)");
  const std::int64_t warps = q_pad_total * a.n_heads, blocks = (warps + kPrepThreads / 32 - 1) / (kPrepThreads / 32);
  q_copy_kernel<<<grid_x(blocks, "attention_backward"), kPrepThreads, 0, s>>>(a, d.head_dim, segs, n_segs, q_pad_total,
                                                                             q, out, lse, d_out, c);
  check_launch("attention_backward (flash, bf16 q and dO, Σ dO·O)");
  if (d.head_dim == 64) backward_for<64>(s, a, segs, n_segs, q_pad_total, k_pad_total, c, d_q, d_k, d_v);
  else backward_for<128>(s, a, segs, n_segs, q_pad_total, k_pad_total, c, d_q, d_k, d_v);
}

}  // namespace braid::backend::cuda
