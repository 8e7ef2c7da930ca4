#include "backend/cuda/attention.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/segments.cuh"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block

struct Args {
  int n_heads, n_kv_heads, head_dim, group;
  std::int64_t q_stride, kv_stride, out_stride;
  float scale, softcap;   // softcap 0: none
  std::int64_t window;    // 0: none
};

// The first key a query at position p sees.
__device__ __forceinline__ std::int64_t first_key(const Args& a, std::int64_t p) {
  return a.window > 0 && p >= a.window ? p - a.window + 1 : 0;
}

// A score from q·k: scaled, and soft-capped when asked; *dcap = d(capped)/d(scaled).
__device__ __forceinline__ float score_of(const Args& a, float qk, float* dcap = nullptr) {
  const float x = qk * a.scale;
  if (a.softcap <= 0.f) {
    if (dcap) *dcap = 1.f;
    return x;
  }
  const float t = tanhf(x / a.softcap);
  if (dcap) *dcap = 1.f - t * t;
  return a.softcap * t;
}

// A head's row into registers: element c = lane + 32·u.
template <int kPer>
__device__ void load_row(const float* p, int hd, float (&r)[kPer]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = lane + 32 * u;
    r[u] = c < hd ? p[c] : 0.0f;
  }
}

template <int kPer>
__device__ float dot_row(const float (&r)[kPer], const float* p, int hd) {
  const int lane = threadIdx.x & 31;
  float s = 0;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = lane + 32 * u;
    if (c < hd) s += r[u] * p[c];
  }
  return warp_sum(s);
}

template <int kPer>
__global__ void forward_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t total_q, const float* q,
                               const float* k, const float* v, float* out, float* lse) {
  const std::int64_t w = blockIdx.x * std::int64_t(kWarps) + (threadIdx.x >> 5);
  if (w >= total_q * a.n_heads) return;  // whole warps leave together
  const std::int64_t qi = w / a.n_heads;
  const int h = int(w % a.n_heads), lane = threadIdx.x & 31, hd = a.head_dim;
  const DeviceSegment& sg = segment_at<&DeviceSegment::q_first>(segs, n_segs, qi);
  const std::int64_t i = qi - sg.q_first, row = sg.q_begin + i, nk = sg.past + i + 1;
  const std::int64_t kv0 = sg.kv_begin * a.kv_stride + std::int64_t(h / a.group) * hd;
  float qr[kPer], acc[kPer];
  load_row(q + row * a.q_stride + std::int64_t(h) * hd, hd, qr);
#pragma unroll
  for (int u = 0; u < kPer; ++u) acc[u] = 0;
  float m = -FLT_MAX, l = 0;
  for (std::int64_t j = first_key(a, sg.past + i); j < nk; ++j) {
    const float sc = score_of(a, dot_row(qr, k + kv0 + j * a.kv_stride, hd));
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new), p = expf(sc - m_new);
    l = l * corr + p;
    const float* vj = v + kv0 + j * a.kv_stride;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int c = lane + 32 * u;
      acc[u] = acc[u] * corr + (c < hd ? p * vj[c] : 0.0f);
    }
    m = m_new;
  }
  float* o = out + row * a.out_stride + std::int64_t(h) * hd;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = lane + 32 * u;
    if (c < hd) o[c] = acc[u] / l;
  }
  if (lane == 0) lse[row * a.n_heads + h] = m + logf(l);
}

// d_q, and Σ dO·O per (query, head) into dsum for the key kernel.
template <int kPer>
__global__ void backward_q_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t total_q, const float* q,
                                  const float* k, const float* v, const float* out, const float* lse,
                                  const float* d_out, float* d_q, float* dsum) {
  const std::int64_t w = blockIdx.x * std::int64_t(kWarps) + (threadIdx.x >> 5);
  if (w >= total_q * a.n_heads) return;
  const std::int64_t qi = w / a.n_heads;
  const int h = int(w % a.n_heads), lane = threadIdx.x & 31, hd = a.head_dim;
  const DeviceSegment& sg = segment_at<&DeviceSegment::q_first>(segs, n_segs, qi);
  const std::int64_t i = qi - sg.q_first, row = sg.q_begin + i, nk = sg.past + i + 1;
  const std::int64_t kv0 = sg.kv_begin * a.kv_stride + std::int64_t(h / a.group) * hd;
  const std::int64_t o0 = row * a.out_stride + std::int64_t(h) * hd;
  float qr[kPer], dor[kPer], dq[kPer];
  load_row(q + row * a.q_stride + std::int64_t(h) * hd, hd, qr);
  load_row(d_out + o0, hd, dor);
  const float di = dot_row(dor, out + o0, hd);
  const float li = lse[row * a.n_heads + h];
#pragma unroll
  for (int u = 0; u < kPer; ++u) dq[u] = 0;
  for (std::int64_t j = first_key(a, sg.past + i); j < nk; ++j) {
    const float* kj = k + kv0 + j * a.kv_stride;
    float dcap;
    const float p = expf(score_of(a, dot_row(qr, kj, hd), &dcap) - li);
    const float ds = p * (dot_row(dor, v + kv0 + j * a.kv_stride, hd) - di) * dcap * a.scale;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int c = lane + 32 * u;
      if (c < hd) dq[u] += ds * kj[c];
    }
  }
  float* dqr = d_q + row * a.q_stride + std::int64_t(h) * hd;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = lane + 32 * u;
    if (c < hd) dqr[c] = dq[u];
  }
  if (lane == 0) dsum[qi * a.n_heads + h] = di;
}

// d_k, d_v of one key row and kv head: over the group's heads and the queries that see it.
template <int kPer>
__global__ void backward_kv_kernel(Args a, const DeviceSegment* segs, int n_segs, std::int64_t total_k,
                                   const float* q, const float* k, const float* v, const float* lse,
                                   const float* d_out, const float* dsum, float* d_k, float* d_v) {
  const std::int64_t w = blockIdx.x * std::int64_t(kWarps) + (threadIdx.x >> 5);
  if (w >= total_k * a.n_kv_heads) return;
  const std::int64_t ki = w / a.n_kv_heads;
  const int g = int(w % a.n_kv_heads), lane = threadIdx.x & 31, hd = a.head_dim;
  const DeviceSegment& sg = segment_at<&DeviceSegment::k_first>(segs, n_segs, ki);
  const std::int64_t jj = ki - sg.k_first;  // key position in the segment
  const std::int64_t kr = (sg.kv_begin + jj) * a.kv_stride + std::int64_t(g) * hd;
  float kreg[kPer], vreg[kPer], dk[kPer], dv[kPer];
  load_row(k + kr, hd, kreg);
  load_row(v + kr, hd, vreg);
#pragma unroll
  for (int u = 0; u < kPer; ++u) dk[u] = dv[u] = 0;
  const std::int64_t i0 = jj > sg.past ? jj - sg.past : 0;  // first query that sees this key
  // ... and one past the last (a sliding window: positions up to jj + window − 1).
  const std::int64_t i1 = a.window > 0 ? min(sg.q_len, max(i0, jj + a.window - sg.past)) : sg.q_len;
  for (int h = g * a.group; h < (g + 1) * a.group; ++h) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t row = sg.q_begin + i;
      const float* qh = q + row * a.q_stride + std::int64_t(h) * hd;
      const float* doh = d_out + row * a.out_stride + std::int64_t(h) * hd;
      float dcap;
      const float p = expf(score_of(a, dot_row(kreg, qh, hd), &dcap) - lse[row * a.n_heads + h]);
      const float ds = p * (dot_row(vreg, doh, hd) - dsum[(sg.q_first + i) * a.n_heads + h]) * dcap * a.scale;
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int c = lane + 32 * u;
        if (c < hd) {
          dv[u] += p * doh[c];
          dk[u] += ds * qh[c];
        }
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int c = lane + 32 * u;
    if (c < hd) {
      d_k[kr + c] += dk[u];
      d_v[kr + c] += dv[u];
    }
  }
}

Args args_of(const AttentionShape& d) {
  if (d.head_dim <= 0 || d.head_dim > 256) {
    throw std::invalid_argument("attention: head_dim " + std::to_string(d.head_dim) + " (CUDA takes 1 to 256)");
  }
  if (d.n_kv_heads <= 0 || d.n_heads % d.n_kv_heads != 0) {
    throw std::invalid_argument("attention: n_heads must be a multiple of n_kv_heads");
  }
  const double scale = d.scale > 0 ? d.scale : 1.0 / std::sqrt(double(d.head_dim));
  return {d.n_heads, d.n_kv_heads, d.head_dim, d.n_heads / d.n_kv_heads, d.q_stride, d.kv_stride,
          std::int64_t(d.n_heads) * d.head_dim, float(scale), float(d.softcap), d.window};
}

unsigned warp_blocks(std::int64_t warps) {
  const std::int64_t b = (warps + kWarps - 1) / kWarps;
  if (b > 0x7fffffff) throw std::invalid_argument("attention: batch too large for one launch");
  return unsigned(b);
}

// Elements of a head row per lane: the template argument of the kernels.
int per_lane(int hd) { return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 8; }

#define BRAID_BY_HEAD_DIM(hd, CALL)             \
  switch (per_lane(hd)) {                        \
    case 1: { constexpr int kPer = 1; CALL; } break; \
    case 2: { constexpr int kPer = 2; CALL; } break; \
    case 4: { constexpr int kPer = 4; CALL; } break; \
    default: { constexpr int kPer = 8; CALL; } break; \
  }

}  // namespace

AttentionPath attention_path_from_env() {
  const char* v = std::getenv("BRAID_CUDA_ATTENTION");
  if (!v || !*v || std::strcmp(v, "flash") == 0) return AttentionPath::flash;
  if (std::strcmp(v, "exact") == 0) return AttentionPath::exact;
  throw std::invalid_argument(std::string("BRAID_CUDA_ATTENTION=") + v + ": expected flash or exact");
}

void attention_forward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                       std::int64_t total_q, const float* q, const float* k, const float* v, float* out, float* lse) {
  if (total_q <= 0) return;
  const Args a = args_of(d);
  const unsigned blocks = warp_blocks(total_q * a.n_heads);
  BRAID_BY_HEAD_DIM(a.head_dim,
                    (forward_kernel<kPer><<<blocks, kWarps * 32, 0, s>>>(a, segs, n_segs, total_q, q, k, v, out, lse)))
  check_launch("attention_forward");
}

void attention_backward(cudaStream_t s, const AttentionShape& d, const DeviceSegment* segs, int n_segs,
                        std::int64_t total_q, std::int64_t total_k, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, const float* d_out, float* d_q, float* d_k, float* d_v,
                        float* scratch) {
  if (total_q <= 0) return;
  const Args a = args_of(d);
  const unsigned q_blocks = warp_blocks(total_q * a.n_heads), k_blocks = warp_blocks(total_k * a.n_kv_heads);
  BRAID_BY_HEAD_DIM(a.head_dim, (backward_q_kernel<kPer><<<q_blocks, kWarps * 32, 0, s>>>(
                                    a, segs, n_segs, total_q, q, k, v, out, lse, d_out, d_q, scratch)))
  check_launch("attention_backward (d_q)");
  BRAID_BY_HEAD_DIM(a.head_dim, (backward_kv_kernel<kPer><<<k_blocks, kWarps * 32, 0, s>>>(
                                    a, segs, n_segs, total_k, q, k, v, lse, d_out, scratch, d_k, d_v)))
  check_launch("attention_backward (d_k, d_v)");
}

}  // namespace braid::backend::cuda
