#include "backend/cuda/flash_attention.cuh"

#include "backend/cuda/check.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kTile = 64;      // queries (forward, d_q) or keys (d_k/d_v) of a block: 16 rows a warp
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

struct Args {
  int n_heads, n_kv_heads, group;
  std::int64_t q_stride, kv_stride, out_stride;
  float scale, scale_log2;  // 1/√d and 1/√d · log2(e): the scores go through exp2
};

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

// kRows rows of kHd f32 (row stride `stride` elements) into bf16 shared memory (row stride
// kHd + 8: rows 16 bytes apart in the banks, so ldmatrix does not conflict); rows at or past
// `valid` are zeros and their memory is not read.
template <int kRows, int kHd>
__device__ __forceinline__ void stage(__nv_bfloat16* dst, const float* src, std::int64_t stride, int valid) {
  constexpr int kLds = kHd + 8, kVec = kHd / 4;
  for (int i = threadIdx.x; i < kRows * kVec; i += kThreads) {
    const int r = i / kVec, c = (i % kVec) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < valid) v = __ldg(reinterpret_cast<const float4*>(src + r * stride + c));
    uint2 o;
    o.x = pack_bf16x2(v.x, v.y);
    o.y = pack_bf16x2(v.z, v.w);
    *reinterpret_cast<uint2*>(dst + r * kLds + c) = o;
  }
}

// The segment whose padded run holds position pos (queries, or keys with kByKey). Empty
// segments have empty runs; the last segment starting at or before pos is the one.
template <bool kByKey>
__device__ const DeviceSegment& find_padded(const DeviceSegment* segs, int n, std::int64_t pos) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    const std::int64_t start = kByKey ? segs[mid].k_pad_first : segs[mid].q_pad_first;
    if (start <= pos) lo = mid; else hi = mid - 1;
  }
  return segs[lo];
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

// ---- forward ------------------------------------------------------------------------------
template <int kHd>
__global__ void __launch_bounds__(kThreads) forward_kernel(Args a, const DeviceSegment* segs, int n_segs,
                                                           std::int64_t tiles, const float* q, const float* k,
                                                           const float* v, float* out, float* lse) {
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kTile / 8, kDt = kHd / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sK = sQ + kTile * kLds;
  __nv_bfloat16* sV = sK + kTile * kLds;

  const std::int64_t pos = (tiles - 1 - std::int64_t(blockIdx.x)) * kTile;  // the longest rows first
  const int h = int(blockIdx.y);
  const DeviceSegment& sg = find_padded<false>(segs, n_segs, pos);
  const std::int64_t i0 = pos - sg.q_pad_first;
  if (i0 >= sg.q_len) return;  // padding: the whole block leaves
  const int nq = int(sg.q_len - i0 < kTile ? sg.q_len - i0 : kTile);
  const std::int64_t past = sg.past, n_keys = past + i0 + nq;
  const std::int64_t kv0 = sg.kv_begin * a.kv_stride + std::int64_t(h / a.group) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;

  stage<kTile, kHd>(sQ, q + (sg.q_begin + i0) * a.q_stride + std::int64_t(h) * kHd, a.q_stride, nq);
  __syncthreads();
  unsigned qf[kKt][4];
#pragma unroll
  for (int kt = 0; kt < kKt; ++kt) ldsm_x4(qf[kt], as_a<kLds>(sQ, warp * 16, kt * 16, lane));

  float o[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows g and g + 8 of the warp (log2 units)
  const std::int64_t last = past + i0 + warp * 16 + g;  // the last key row g sees (row g + 8: 8 more)
  const int blocks = int((n_keys + kTile - 1) / kTile);
  for (int jb = 0; jb < blocks; ++jb) {
    const std::int64_t j0 = std::int64_t(jb) * kTile;
    const int valid = int(n_keys - j0 < kTile ? n_keys - j0 : kTile);
    const int lim0 = clamp_to(last - j0, -1, kTile), lim1 = clamp_to(last + 8 - j0, -1, kTile);
    __syncthreads();  // every warp is done with the previous keys
    stage<kTile, kHd>(sK, k + kv0 + j0 * a.kv_stride, a.kv_stride, valid);
    stage<kTile, kHd>(sV, v + kv0 + j0 * a.kv_stride, a.kv_stride, valid);
    __syncthreads();

    float sc[kNt][4];
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
    for (int kt = 0; kt < kKt; ++kt) {
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        unsigned b[4];
        ldsm_x4(b, as_b<kLds>(sK, np * 16, kt * 16, lane));
        mma(sc[2 * np], qf[kt], b[0], b[1]);
        mma(sc[2 * np + 1], qf[kt], b[2], b[3]);
      }
    }
    // Scale into log2 units; mask keys past a row's last only in tiles that reach past the
    // warp's first row's (rows past the segment see zero keys and are never written).
    const bool crosses = j0 + kTile - 1 > past + i0 + warp * 16;
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = sc[nt][e] * a.scale_log2;
        if (crosses && nt * 8 + 2 * t + (e & 1) > (e < 2 ? lim0 : lim1)) x = -INFINITY;
        sc[nt][e] = x;
      }
      mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
    }
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    // Key 0 is seen by every row, so a row's maximum is finite from the first tile on; the
    // guard keeps exp2(-inf - -inf) out all the same.
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
        unsigned b[4];
        ldsm_x4_trans(b, as_b_trans<kLds>(sV, kk * 16, dp * 16, lane));
        mma(o[2 * dp], pa, b[0], b[1]);
        mma(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
  }
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
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

// ---- backward: Σ dO·O per (query, head) -----------------------------------------------
__global__ void dsum_kernel(Args a, int head_dim, const DeviceSegment* segs, int n_segs, std::int64_t total_q,
                            const float* out, const float* d_out, float* dsum) {
  const std::int64_t w = blockIdx.x * std::int64_t(kThreads / 32) + (threadIdx.x >> 5);
  if (w >= total_q * a.n_heads) return;
  const std::int64_t qi = w / a.n_heads;
  const int h = int(w % a.n_heads), lane = int(threadIdx.x) & 31;
  int lo = 0, hi = n_segs - 1;  // the segment of query qi
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].q_first <= qi) lo = mid; else hi = mid - 1;
  }
  const DeviceSegment& sg = segs[lo];
  const std::int64_t o0 = (sg.q_begin + qi - sg.q_first) * a.out_stride + std::int64_t(h) * head_dim;
  float s = 0.f;
  for (int c = lane; c < head_dim; c += 32) s += out[o0 + c] * d_out[o0 + c];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) dsum[qi * a.n_heads + h] = s;
}

// ---- backward: d_q ----------------------------------------------------------------------
// A block: 64 queries of head h. Per key tile: S = Q·Kᵀ, P = exp(S − lse), dP = dO·Vᵀ,
// dS = P∘(dP − Σ dO·O), d_q += dS·K.
template <int kHd>
__global__ void __launch_bounds__(kThreads) dq_kernel(Args a, const DeviceSegment* segs, int n_segs,
                                                      std::int64_t tiles, const float* q, const float* k,
                                                      const float* v, const float* lse, const float* d_out,
                                                      const float* dsum, float* d_q) {
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kTile / 8, kDt = kHd / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sDO = sQ + kTile * kLds;
  __nv_bfloat16* sK = sDO + kTile * kLds;
  __nv_bfloat16* sV = sK + kTile * kLds;

  const std::int64_t pos = (tiles - 1 - std::int64_t(blockIdx.x)) * kTile;
  const int h = int(blockIdx.y);
  const DeviceSegment& sg = find_padded<false>(segs, n_segs, pos);
  const std::int64_t i0 = pos - sg.q_pad_first;
  if (i0 >= sg.q_len) return;
  const int nq = int(sg.q_len - i0 < kTile ? sg.q_len - i0 : kTile);
  const std::int64_t past = sg.past, n_keys = past + i0 + nq;
  const std::int64_t kv0 = sg.kv_begin * a.kv_stride + std::int64_t(h / a.group) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;

  stage<kTile, kHd>(sQ, q + (sg.q_begin + i0) * a.q_stride + std::int64_t(h) * kHd, a.q_stride, nq);
  stage<kTile, kHd>(sDO, d_out + (sg.q_begin + i0) * a.out_stride + std::int64_t(h) * kHd, a.out_stride, nq);
  // Rows g and g + 8 of the warp: lse in log2 units (+inf past the segment: P = 0) and Σ dO·O.
  float lse2[2], dd[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
    lse2[half] = r < nq ? lse[(sg.q_begin + i0 + r) * a.n_heads + h] * kLog2e : INFINITY;
    dd[half] = r < nq ? dsum[(sg.q_first + i0 + r) * a.n_heads + h] : 0.f;
  }
  __syncthreads();

  float dq[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;
  const std::int64_t last = past + i0 + warp * 16 + g;
  const int blocks = int((n_keys + kTile - 1) / kTile);
  for (int jb = 0; jb < blocks; ++jb) {
    const std::int64_t j0 = std::int64_t(jb) * kTile;
    const int valid = int(n_keys - j0 < kTile ? n_keys - j0 : kTile);
    const int lim0 = clamp_to(last - j0, -1, kTile), lim1 = clamp_to(last + 8 - j0, -1, kTile);
    __syncthreads();
    stage<kTile, kHd>(sK, k + kv0 + j0 * a.kv_stride, a.kv_stride, valid);
    stage<kTile, kHd>(sV, v + kv0 + j0 * a.kv_stride, a.kv_stride, valid);
    __syncthreads();

    float sc[kNt][4], dp[kNt][4];
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[nt][e] = dp[nt][e] = 0.f;
    }
#pragma unroll
    for (int kt = 0; kt < kKt; ++kt) {
      unsigned qa[4], da[4];
      ldsm_x4(qa, as_a<kLds>(sQ, warp * 16, kt * 16, lane));
      ldsm_x4(da, as_a<kLds>(sDO, warp * 16, kt * 16, lane));
#pragma unroll
      for (int np = 0; np < kNt / 2; ++np) {
        unsigned b[4];
        ldsm_x4(b, as_b<kLds>(sK, np * 16, kt * 16, lane));
        mma(sc[2 * np], qa, b[0], b[1]);
        mma(sc[2 * np + 1], qa, b[2], b[3]);
        ldsm_x4(b, as_b<kLds>(sV, np * 16, kt * 16, lane));
        mma(dp[2 * np], da, b[0], b[1]);
        mma(dp[2 * np + 1], da, b[2], b[3]);
      }
    }
    const bool crosses = j0 + kTile - 1 > past + i0 + warp * 16;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1;
        float p = exp2f(sc[nt][e] * a.scale_log2 - lse2[half]);
        if (crosses && nt * 8 + 2 * t + (e & 1) > (half ? lim1 : lim0)) p = 0.f;
        sc[nt][e] = p * (dp[nt][e] - dd[half]);  // dS
      }
    }
#pragma unroll
    for (int kk = 0; kk < kNt / 2; ++kk) {
      unsigned sa[4];
      accumulators_as_a(sa, sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
      for (int dpi = 0; dpi < kHd / 16; ++dpi) {
        unsigned b[4];
        ldsm_x4_trans(b, as_b_trans<kLds>(sK, kk * 16, dpi * 16, lane));
        mma(dq[2 * dpi], sa, b[0], b[1]);
        mma(dq[2 * dpi + 1], sa, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
    if (r >= nq) continue;
    float* row = d_q + (sg.q_begin + i0 + r) * a.q_stride + std::int64_t(h) * kHd + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDt; ++dt) {
      *reinterpret_cast<float2*>(row + dt * 8) = make_float2(dq[dt][2 * half] * a.scale, dq[dt][2 * half + 1] * a.scale);
    }
  }
}

// ---- backward: d_k, d_v -------------------------------------------------------------------
// A block: 64 keys of kv head g, each warp 16 of them, over every head of the group and every
// query tile of kBq that sees them. Per query tile: Sᵀ = K·Qᵀ, Pᵀ, dPᵀ = V·dOᵀ,
// dSᵀ = Pᵀ∘(dPᵀ − Σ dO·O), d_v += Pᵀ·dO, d_k += dSᵀ·Q.
template <int kHd, int kBq>
__global__ void __launch_bounds__(kThreads) dkv_kernel(Args a, const DeviceSegment* segs, int n_segs,
                                                       std::int64_t tiles, const float* q, const float* k,
                                                       const float* v, const float* lse, const float* d_out,
                                                       const float* dsum, float* d_k, float* d_v) {
  constexpr int kLds = kHd + 8, kKt = kHd / 16, kNt = kBq / 8, kDt = kHd / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sK = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sV = sK + kTile * kLds;
  __nv_bfloat16* sQ = sV + kTile * kLds;
  __nv_bfloat16* sDO = sQ + kBq * kLds;
  auto* sL = reinterpret_cast<float*>(sDO + kBq * kLds);  // lse of the tile's queries, log2 units
  float* sD = sL + kBq;                                   // Σ dO·O of the tile's queries

  const std::int64_t pos = std::int64_t(blockIdx.x) * kTile;  // the first keys (the most queries) first
  const int gk = int(blockIdx.y);
  const DeviceSegment& sg = find_padded<true>(segs, n_segs, pos);
  const std::int64_t j0 = pos - sg.k_pad_first, past = sg.past, n_keys = past + sg.q_len;
  if (j0 >= n_keys) return;
  const int nk = int(n_keys - j0 < kTile ? n_keys - j0 : kTile);
  const std::int64_t kv0 = (sg.kv_begin + j0) * a.kv_stride + std::int64_t(gk) * kHd;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;

  stage<kTile, kHd>(sK, k + kv0, a.kv_stride, nk);
  stage<kTile, kHd>(sV, v + kv0, a.kv_stride, nk);

  float dk[kDt][4], dv[kDt][4];
#pragma unroll
  for (int dt = 0; dt < kDt; ++dt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;
  }
  const std::int64_t key = j0 + warp * 16 + g;  // this thread's key rows: key and key + 8
  const std::int64_t first_q = j0 > past ? j0 - past : 0;          // the first query that sees key j0
  const std::int64_t qb_begin = first_q / kBq, qb_end = (sg.q_len + kBq - 1) / kBq;
  for (int hh = 0; hh < a.group; ++hh) {
    const int h = gk * a.group + hh;
    for (std::int64_t qb = qb_begin; qb < qb_end; ++qb) {
      const std::int64_t i0 = qb * kBq;
      const int nq = int(sg.q_len - i0 < kBq ? sg.q_len - i0 : kBq);
      __syncthreads();  // every warp is done with the previous queries (and, first, sK/sV are staged)
      stage<kBq, kHd>(sQ, q + (sg.q_begin + i0) * a.q_stride + std::int64_t(h) * kHd, a.q_stride, nq);
      stage<kBq, kHd>(sDO, d_out + (sg.q_begin + i0) * a.out_stride + std::int64_t(h) * kHd, a.out_stride, nq);
      for (int i = int(threadIdx.x); i < kBq; i += kThreads) {
        sL[i] = i < nq ? lse[(sg.q_begin + i0 + i) * a.n_heads + h] * kLog2e : INFINITY;
        sD[i] = i < nq ? dsum[(sg.q_first + i0 + i) * a.n_heads + h] : 0.f;
      }
      __syncthreads();

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
          unsigned b[4];
          ldsm_x4(b, as_b<kLds>(sQ, np * 16, kt * 16, lane));
          mma(st[2 * np], ka, b[0], b[1]);
          mma(st[2 * np + 1], ka, b[2], b[3]);
          ldsm_x4(b, as_b<kLds>(sDO, np * 16, kt * 16, lane));
          mma(dpt[2 * np], va, b[0], b[1]);
          mma(dpt[2 * np + 1], va, b[2], b[3]);
        }
      }
      // A key row is masked for the queries before it (key > past + query); only tiles where
      // the warp's last key passes the tile's first query need the test.
      const bool crosses = j0 + warp * 16 + 15 > past + i0;
      // Query columns before rel0 (rel1) do not see key row g (g + 8).
      const int rel0 = clamp_to(key - past - i0, -1, kBq + 1), rel1 = clamp_to(key + 8 - past - i0, -1, kBq + 1);
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nt * 8 + 2 * t + (e & 1);
          float p = exp2f(st[nt][e] * a.scale_log2 - sL[col]);
          if (crosses && col < (e < 2 ? rel0 : rel1)) p = 0.f;
          st[nt][e] = p;
          dpt[nt][e] = p * (dpt[nt][e] - sD[col]);  // dSᵀ
        }
      }
#pragma unroll
      for (int kk = 0; kk < kNt / 2; ++kk) {
        unsigned pa[4], sa[4];
        accumulators_as_a(pa, st[2 * kk], st[2 * kk + 1]);
        accumulators_as_a(sa, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
        for (int dpi = 0; dpi < kHd / 16; ++dpi) {
          unsigned b[4];
          ldsm_x4_trans(b, as_b_trans<kLds>(sDO, kk * 16, dpi * 16, lane));
          mma(dv[2 * dpi], pa, b[0], b[1]);
          mma(dv[2 * dpi + 1], pa, b[2], b[3]);
          ldsm_x4_trans(b, as_b_trans<kLds>(sQ, kk * 16, dpi * 16, lane));
          mma(dk[2 * dpi], sa, b[0], b[1]);
          mma(dk[2 * dpi + 1], sa, b[2], b[3]);
        }
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = warp * 16 + g + 8 * half;
    if (r >= nk) continue;
    const std::int64_t off = kv0 + std::int64_t(r) * a.kv_stride + 2 * t;
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
  return {d.n_heads,  d.n_kv_heads, d.n_heads / d.n_kv_heads, d.q_stride, d.kv_stride, std::int64_t(d.n_heads) * d.head_dim,
          float(1.0 / std::sqrt(double(d.head_dim))), float(kLog2e / std::sqrt(double(d.head_dim)))};
}

constexpr std::size_t lds_bytes(int hd, int rows) { return std::size_t(rows) * std::size_t(hd + 8) * 2; }
template <int kHd> constexpr std::size_t forward_smem() { return 3 * lds_bytes(kHd, kTile); }
template <int kHd> constexpr std::size_t dq_smem() { return 4 * lds_bytes(kHd, kTile); }
template <int kHd, int kBq> constexpr std::size_t dkv_smem() {
  return 2 * lds_bytes(kHd, kTile) + 2 * lds_bytes(kHd, kBq) + 2 * std::size_t(kBq) * sizeof(float);
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

template <int kHd>
void forward_for(cudaStream_t s, const Args& a, const DeviceSegment* segs, int n_segs, std::int64_t tiles,
                 const float* q, const float* k, const float* v, float* out, float* lse) {
  constexpr std::size_t smem = forward_smem<kHd>();
  allow_smem(forward_kernel<kHd>, smem, "attention_forward (flash)");
  forward_kernel<kHd><<<dim3(grid_x(tiles, "attention_forward"), unsigned(a.n_heads)), kThreads, smem, s>>>(
      a, segs, n_segs, tiles, q, k, v, out, lse);
  check_launch("attention_forward (flash)");
}

template <int kHd>
void backward_for(cudaStream_t s, const Args& a, const DeviceSegment* segs, int n_segs, std::int64_t q_tiles,
                  std::int64_t k_tiles, const float* q, const float* k, const float* v, const float* lse,
                  const float* d_out, const float* dsum, float* d_q, float* d_k, float* d_v) {
  constexpr std::size_t smem_q = dq_smem<kHd>();
  allow_smem(dq_kernel<kHd>, smem_q, "attention_backward (flash d_q)");
  dq_kernel<kHd><<<dim3(grid_x(q_tiles, "attention_backward"), unsigned(a.n_heads)), kThreads, smem_q, s>>>(
      a, segs, n_segs, q_tiles, q, k, v, lse, d_out, dsum, d_q);
  check_launch("attention_backward (flash d_q)");
  constexpr int kBq = dkv_queries<kHd>();
  constexpr std::size_t smem_kv = dkv_smem<kHd, kBq>();
  allow_smem(dkv_kernel<kHd, kBq>, smem_kv, "attention_backward (flash d_k, d_v)");
  dkv_kernel<kHd, kBq><<<dim3(grid_x(k_tiles, "attention_backward"), unsigned(a.n_kv_heads)), kThreads, smem_kv, s>>>(
      a, segs, n_segs, k_tiles, q, k, v, lse, d_out, dsum, d_k, d_v);
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

void flash_attention_forward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                             std::int64_t q_pad_total, const float* q, const float* k, const float* v, float* out,
                             float* lse) {
  if (q_pad_total <= 0) return;
  const Args a = args_of(d);
  const std::int64_t tiles = q_pad_total / kTile;
  if (d.head_dim == 64) forward_for<64>(s, a, segs, n_segs, tiles, q, k, v, out, lse);
  else forward_for<128>(s, a, segs, n_segs, tiles, q, k, v, out, lse);
}

void flash_attention_backward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                              std::int64_t total_q, std::int64_t q_pad_total, std::int64_t k_pad_total,
                              const float* q, const float* k, const float* v, const float* out, const float* lse,
                              const float* d_out, float* d_q, float* d_k, float* d_v, float* scratch) {
  if (total_q <= 0) return;
  const Args a = args_of(d);
  const std::int64_t warps = total_q * a.n_heads, blocks = (warps + kThreads / 32 - 1) / (kThreads / 32);
  dsum_kernel<<<grid_x(blocks, "attention_backward"), kThreads, 0, s>>>(a, d.head_dim, segs, n_segs, total_q, out,
                                                                         d_out, scratch);
  check_launch("attention_backward (flash, Σ dO·O)");
  const std::int64_t q_tiles = q_pad_total / kTile, k_tiles = k_pad_total / kTile;
  if (d.head_dim == 64) backward_for<64>(s, a, segs, n_segs, q_tiles, k_tiles, q, k, v, lse, d_out, scratch, d_q, d_k, d_v);
  else backward_for<128>(s, a, segs, n_segs, q_tiles, k_tiles, q, k, v, lse, d_out, scratch, d_q, d_k, d_v);
}

}  // namespace braid::backend::cuda
