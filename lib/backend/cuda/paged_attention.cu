#include "backend/cuda/paged_attention.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 128;  // per attention block
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;

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

// Keys are visited by lane groups: a group of LPK lanes (a power of two, 4 to 32) holds one
// key, each lane NC chunks of VEC elements of it (VEC = 16 bytes of the cache type, or 1
// when the rows are not 16-byte aligned), so a warp reads 32 / LPK keys a load, each key
// row whole and in 16-byte pieces. A key's score is summed over its LPK lanes by shuffles.
// Every lane group keeps its own online softmax (max, sum, Σ p·v of its dimensions) over
// the keys it visits, with no block-wide step in the key loop; the groups and warps are
// merged once at the end.
constexpr int kFillHeads = 4096;        // rows × query heads below which contexts are split finer
constexpr int kMaxGroupHeads = 8;       // query heads of one kv head a block serves, at most

// A tuning knob read once: BRAID_CUDA_PAGED_<NAME>, a positive integer, else the default
// (docs/gpu.md).
int knob(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const int x = std::atoi(v);
  if (x <= 0) throw std::invalid_argument(std::string(name) + "=" + v + ": expected a positive integer");
  return x;
}
int fill_heads() {
  static const int x = knob("BRAID_CUDA_PAGED_FILL", kFillHeads);
  return x;
}
int max_group_heads() {
  static const int x = knob("BRAID_CUDA_PAGED_HEADS", kMaxGroupHeads);
  return x;
}
constexpr int kSplitUnit = 64;          // keys per split, a multiple of this
constexpr float kLog2e = 1.4426950408889634f;

template <typename KV, int VEC>
struct Chunk;  // VEC elements of a key or value row, loaded at once, read as float

template <>
struct Chunk<unsigned short, 8> {
  uint4 w;
  __device__ __forceinline__ void load(const unsigned short* p) { w = __ldg(reinterpret_cast<const uint4*>(p)); }
  __device__ __forceinline__ void zero() { w = make_uint4(0u, 0u, 0u, 0u); }
  __device__ __forceinline__ float at(int i) const {
    const unsigned x = i < 2 ? w.x : i < 4 ? w.y : i < 6 ? w.z : w.w;
    return (i & 1) ? __uint_as_float(x & 0xffff0000u) : __uint_as_float(x << 16);  // little end first
  }
};
template <>
struct Chunk<float, 4> {
  float4 w;
  __device__ __forceinline__ void load(const float* p) { w = __ldg(reinterpret_cast<const float4*>(p)); }
  __device__ __forceinline__ void zero() { w = make_float4(0.f, 0.f, 0.f, 0.f); }
  __device__ __forceinline__ float at(int i) const { return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; }
};
template <typename KV>
struct Chunk<KV, 1> {
  float w;
  __device__ __forceinline__ void load(const KV* p) { w = load_as_float(p, 0); }
  __device__ __forceinline__ void zero() { w = 0.f; }
  __device__ __forceinline__ float at(int) const { return w; }
};

// 2^(a − b) with −∞ − −∞ read as a weight of 0 (a state that has seen no key).
__device__ __forceinline__ float weight_of(float a, float b) { return a == -INFINITY ? 0.f : exp2f(a - b); }

// The first key of a row's context its query sees (a sliding window), 0 without one.
__device__ __forceinline__ int window_start(const PagedShape& d, int ctx) {
  return d.window > 0 && ctx > d.window ? int(ctx - d.window) : 0;
}

// Grid: (rows, n_kv_heads · group / G, splits). Block: kWarps warps. Shared: the warps'
// (max, sum) per head and their Σ p·v, [kWarps][G][hd]. Scores are in log2 units (the
// queries pre-scaled by log2(e)/√hd), so the split partials' max is too.
template <typename KV, int G, int LPK, int VEC, int NC, int U>
__global__ void __launch_bounds__(kThreads)
paged_attention_kernel(PagedShape d, const float* q, const KV* k, const KV* v, int block_size, std::int64_t row,
                       const std::int32_t* tables, int max_blocks, const std::int32_t* row_seq,
                       const std::int32_t* row_ctx, int split_keys, float* out, float* part_o, float* part_ml) {
  constexpr int KPW = 32 / LPK;  // keys a warp holds at once
  extern __shared__ float o_s[];  // [kWarps][G][hd]
  __shared__ float m_s[kWarps][G], l_s[kWarps][G];
  const int hd = d.head_dim;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int kslot = lane / LPK, c = lane % LPK;
  const std::int64_t r = blockIdx.x;
  const int ctx = row_ctx[r];
  const int begin = int(blockIdx.z) * split_keys;
  const int lo = window_start(d, ctx);
  if (ctx <= 0 || begin >= ctx || begin + split_keys <= lo) return;  // the combine skips such splits
  const int end = min(ctx, begin + split_keys);
  const int group = d.n_heads / d.n_kv_heads;
  const int chunks = group / G;
  const int kvh = int(blockIdx.y) / chunks;
  const int h0 = kvh * group + (int(blockIdx.y) % chunks) * G;

  // This lane's dimensions: chunk c + LPK·i holds [VEC·(c + LPK·i), + VEC), when below hd.
  bool has[NC];
#pragma unroll
  for (int i = 0; i < NC; ++i) has[i] = (c + LPK * i) * VEC < hd;
  float qf[G][NC][VEC], acc[G][NC][VEC], m[G], l[G];
  // Queries pre-scaled into log2 units, or only by the scale where the scores are capped
  // first (then the cap's output goes into log2 units).
  const float cap = float(d.softcap);
  const float base_scale = d.scale > 0 ? float(d.scale) : rsqrtf(float(hd));
  const float scale = cap > 0.f ? base_scale : base_scale * kLog2e;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < NC; ++i) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const int dim = (c + LPK * i) * VEC + e;
        qf[g][i][e] = has[i] ? q[r * d.q_stride + std::int64_t(h0 + g) * hd + dim] * scale : 0.f;
        acc[g][i][e] = 0.f;
      }
    }
  }
  const std::int32_t* table = tables + std::int64_t(row_seq[r]) * max_blocks;
  const std::int64_t col = std::int64_t(kvh) * hd;

  for (int t0 = max(begin, lo); t0 < end; t0 += kWarps * KPW * U) {
    Chunk<KV, VEC> kc[U][NC], vc[U][NC];
    bool live[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = t0 + (u * kWarps + warp) * KPW + kslot;
      live[u] = j < end;
      const std::int64_t slot = live[u] ? std::int64_t(__ldg(table + j / block_size)) * block_size + j % block_size : 0;
      const std::int64_t base = slot * row + col;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        if (live[u] && has[i]) {
          kc[u][i].load(k + base + (c + LPK * i) * VEC);
          vc[u][i].load(v + base + (c + LPK * i) * VEC);
        } else {
          kc[u][i].zero();
          vc[u][i].zero();
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s[U];
      float mx = -INFINITY;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float x = 0.f;
#pragma unroll
        for (int i = 0; i < NC; ++i) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) x += qf[g][i][e] * kc[u][i].at(e);
        }
#pragma unroll
        for (int o = LPK / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
        if (cap > 0.f) x = cap * tanhf(x / cap) * kLog2e;
        s[u] = live[u] ? x : -INFINITY;
        mx = fmaxf(mx, s[u]);
      }
      if (mx == -INFINITY) continue;  // no live key for this lane group in this step
      const float m_new = fmaxf(m[g], mx);
      const float corr = weight_of(m[g], m_new);
      l[g] *= corr;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[g][i][e] *= corr;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float p = live[u] ? exp2f(s[u] - m_new) : 0.f;
        l[g] += p;
#pragma unroll
        for (int i = 0; i < NC; ++i) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[g][i][e] += p * vc[u][i].at(e);
        }
      }
      m[g] = m_new;
    }
  }

  // Merge the warp's lane groups (lanes c, c + LPK, ... hold the same dimensions), in a
  // fixed order, then the warps through shared memory.
#pragma unroll
  for (int o = LPK; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[g], o);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[g], o);
      const float m_new = fmaxf(m[g], m_o);
      const float a = weight_of(m[g], m_new), b = weight_of(m_o, m_new);
      l[g] = l[g] * a + l_o * b;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float x_o = __shfl_xor_sync(0xffffffffu, acc[g][i][e], o);
          acc[g][i][e] = acc[g][i][e] * a + x_o * b;
        }
      }
      m[g] = m_new;
    }
  }
  if (kslot == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (c == 0) {
        m_s[warp][g] = m[g];
        l_s[warp][g] = l[g];
      }
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        if (has[i]) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) o_s[(warp * G + g) * hd + (c + LPK * i) * VEC + e] = acc[g][i][e];
        }
      }
    }
  }
  __syncthreads();

  const std::int64_t splits = gridDim.z;
  for (int x = int(threadIdx.x); x < G * hd; x += kThreads) {
    const int g = x / hd, e = x % hd;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
    float o = 0.f, sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float a = weight_of(m_s[w][g], mx);
      o += o_s[(w * G + g) * hd + e] * a;
      sum += l_s[w][g] * a;
    }
    const std::int64_t head = r * d.n_heads + h0 + g;
    if (splits == 1) {
      out[head * hd + e] = o / sum;
    } else {
      part_o[(head * splits + blockIdx.z) * hd + e] = o;
      if (e == 0) {
        part_ml[2 * (head * splits + blockIdx.z)] = mx;
        part_ml[2 * (head * splits + blockIdx.z) + 1] = sum;
      }
    }
  }
}

// One block per (row, head): the splits' partial sums rescaled to their common max (log2
// units). Threads take the head dimensions.
__global__ void paged_attention_combine_kernel(PagedShape d, const std::int32_t* row_ctx, int splits, int split_keys,
                                               const float* part_o, const float* part_ml, float* out) {
  extern __shared__ float w_s[];  // [splits]: each split's weight, 2^(m_s − max) / total
  const std::int64_t r = blockIdx.x;
  const int h = blockIdx.y, hd = d.head_dim;
  const int ctx = row_ctx[r];
  if (ctx <= 0) return;
  const int used = min(splits, (ctx + split_keys - 1) / split_keys);
  const int first = window_start(d, ctx) / split_keys;  // splits wholly before the window wrote nothing
  const std::int64_t at = (r * d.n_heads + h) * splits;
  float mx = -INFINITY;
  for (int s = first; s < used; ++s) mx = fmaxf(mx, part_ml[2 * (at + s)]);
  float total = 0.f;
  for (int s = first; s < used; ++s) total += part_ml[2 * (at + s) + 1] * exp2f(part_ml[2 * (at + s)] - mx);
  for (int s = first + int(threadIdx.x); s < used; s += blockDim.x) w_s[s] = exp2f(part_ml[2 * (at + s)] - mx) / total;
  __syncthreads();
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float o = 0.f;
    for (int s = first; s < used; ++s) o += part_o[(at + s) * hd + e] * w_s[s];
    out[(r * d.n_heads + h) * std::int64_t(hd) + e] = o;
  }
}

// Keys per split: the whole context when rows × heads fill the GPU, else fewer (a multiple
// of kSplitUnit) so that a small batch still spreads over the multiprocessors. A function
// of (rows, heads, longest context) only, as the scratch size is.
int split_keys_for(std::int64_t n, int n_heads, std::int64_t max_context) {
  const std::int64_t heads = std::max<std::int64_t>(1, n * n_heads);
  const std::int64_t want = (fill_heads() + heads - 1) / heads;  // splits wanted
  std::int64_t keys = (max_context + want - 1) / want;
  keys = (keys + kSplitUnit - 1) / kSplitUnit * kSplitUnit;
  return int(std::min<std::int64_t>(0x40000000, std::max<std::int64_t>(kSplitUnit, keys)));
}
int splits_for(std::int64_t n, int n_heads, std::int64_t max_context) {
  const int keys = split_keys_for(n, n_heads, max_context);
  return int((max_context + keys - 1) / keys);
}

struct Launch {
  const PagedShape& d;
  std::int64_t n;
  const float* q;
  const PagedCache& c;
  const std::int32_t* tables;
  int max_blocks;
  const std::int32_t* row_seq;
  const std::int32_t* row_ctx;
  int splits, split_keys;
  float *out, *part_o, *part_ml;
};

template <typename KV, int G, int LPK, int VEC, int NC>
void launch(cudaStream_t s, const Launch& a) {
  // Keys a lane group loads at once: 64 bytes of keys and 64 of values in flight a lane
  // where the registers allow.
  constexpr int U = NC > 1 ? 1 : G > 4 || (G > 2 && VEC < 8) ? 2 : 4;
  const dim3 grid(unsigned(a.n), unsigned(a.d.n_heads / G), unsigned(a.splits));
  const std::size_t shared = std::size_t(kWarps) * G * std::size_t(a.d.head_dim) * sizeof(float);
  paged_attention_kernel<KV, G, LPK, VEC, NC, U><<<grid, kThreads, shared, s>>>(
      a.d, a.q, static_cast<const KV*>(a.c.k), static_cast<const KV*>(a.c.v), a.c.block_size, a.c.row, a.tables,
      a.max_blocks, a.row_seq, a.row_ctx, a.split_keys, a.out, a.part_o, a.part_ml);
}

// The lane layout for the head dimension: 16-byte chunks when the rows allow it, else
// single elements over the whole warp.
template <typename KV, int G>
void launch_dims(cudaStream_t s, const Launch& a) {
  constexpr int V = 16 / int(sizeof(KV));
  const int hd = a.d.head_dim;
  const bool aligned = hd % V == 0 && a.c.row % V == 0 && reinterpret_cast<std::uintptr_t>(a.c.k) % 16 == 0 &&
                       reinterpret_cast<std::uintptr_t>(a.c.v) % 16 == 0;
  if (!aligned) return launch<KV, G, 32, 1, kMaxHeadDim / 32>(s, a);
  const int chunks = hd / V;
  if (chunks <= 4) return launch<KV, G, 4, V, 1>(s, a);
  if (chunks <= 8) return launch<KV, G, 8, V, 1>(s, a);
  if (chunks <= 16) return launch<KV, G, 16, V, 1>(s, a);
  if (chunks <= 32 || V == 8) return launch<KV, G, 32, V, 1>(s, a);  // bf16: head_dim <= 256 is 32 chunks
  launch<KV, G, 32, V, (V == 8 ? 1 : 2)>(s, a);
}

template <typename KV>
void launch_grouped(cudaStream_t s, const Launch& a) {
  // The most query heads of one kv head per block, up to 8 (or BRAID_CUDA_PAGED_HEADS).
  const int group = a.d.n_heads / a.d.n_kv_heads, most = max_group_heads();
  if (group % 8 == 0 && most >= 8) return launch_dims<KV, 8>(s, a);
  if (group % 4 == 0 && most >= 4) return launch_dims<KV, 4>(s, a);
  if (group % 2 == 0 && most >= 2) return launch_dims<KV, 2>(s, a);
  launch_dims<KV, 1>(s, a);
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
  const Launch a{d, n, q, c, block_tables, max_blocks, row_seq, row_ctx, splits, split_keys, out, part_o, part_ml};
  if (c.bf16) {
    launch_grouped<unsigned short>(s, a);
  } else {
    launch_grouped<float>(s, a);
  }
  check_launch("paged_attention");
  if (splits > 1) {
    const unsigned threads = d.head_dim <= 64 ? 64 : 128;
    paged_attention_combine_kernel<<<dim3(unsigned(n), unsigned(d.n_heads)), threads, splits * sizeof(float), s>>>(
        d, row_ctx, splits, split_keys, part_o, part_ml, out);
    check_launch("paged_attention (combine)");
  }
}

}  // namespace braid::backend::cuda
