#include "backend/cuda/sample.cuh"

#include "backend/cuda/check.cuh"
#include "backend/cuda/reduce.cuh"

#include <cub/block/block_scan.cuh>

#include <cfloat>
#include <climits>
#include <stdexcept>

namespace braid::backend::cuda {
namespace {

constexpr int kThreads = 256;

// Larger logit, larger key (IEEE bits made unsigned-ordered).
__device__ unsigned key_of(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// A cut of the order (key descending, id ascending): tokens before and at (key, lim).
struct Cut {
  unsigned key = 0;
  int lim = INT_MAX;
  __device__ bool keeps(unsigned k, int id) const { return k > key || (k == key && id <= lim); }
};

struct Row {
  const float* z;
  int vocab;
  double max_logit, inv_t;
  Cut top_k, top_p;  // both keep everything until set
  __device__ bool in(int id) const {
    const unsigned k = key_of(z[id]);
    return top_k.keeps(k, id) && top_p.keeps(k, id);
  }
  __device__ double weight(int id) const { return exp((double(z[id]) - max_logit) * inv_t); }
};

__device__ double block_sum_d(double v) { return block_sum(v); }

// Σ over tokens in the row's set with key >= min_key of weight (or 1 when count).
__device__ double mass_from(const Row& r, unsigned min_key, bool count) {
  double s = 0;
  for (int j = threadIdx.x; j < r.vocab; j += blockDim.x) {
    if (key_of(r.z[j]) >= min_key && r.in(j)) s += count ? 1.0 : r.weight(j);
  }
  return block_sum_d(s);
}

// The largest key κ with mass_from(κ) passing target (>= or, strict, >).
__device__ unsigned bisect(const Row& r, double target, bool strict, bool count) {
  unsigned prefix = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const unsigned cand = prefix | (1u << bit);
    const double m = mass_from(r, cand, count);
    if (strict ? m > target : m >= target) prefix = cand;
  }
  return prefix;
}

// Among the set's tokens with key == k (any key when all_keys), in id order: the first id where base + the running
// sum (of weights, or of 1 when count) passes target; the last such id when none does. Each thread takes a
// contiguous run of ids: one pass sums the runs, a block scan places them, and the thread whose run the target
// falls in walks it again in id order (the threads after it, should rounding put the crossing past its run,
// cross at their first member; the smallest id found wins).
__device__ int first_crossing(const Row& r, bool all_keys, unsigned k, double base, double target, bool strict, bool count) {
  using Scan = cub::BlockScan<double, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int per = (r.vocab + kThreads - 1) / kThreads;
  const int lo = min(r.vocab, int(threadIdx.x) * per), hi = min(r.vocab, lo + per);
  auto member = [&](int j) { return (all_keys || key_of(r.z[j]) == k) && r.in(j); };
  auto passes = [&](double m) { return strict ? m > target : m >= target; };
  double mine = 0;
  int last = -1;
  for (int j = lo; j < hi; ++j) {
    if (member(j)) {
      mine += count ? 1.0 : r.weight(j);
      last = j;
    }
  }
  double before;
  __syncthreads();
  Scan(tmp).ExclusiveSum(mine, before);
  double run = base + before;
  int hit = INT_MAX;
  if (passes(run + mine)) {
    for (int j = lo; j < hi && hit == INT_MAX; ++j) {
      if (!member(j)) continue;
      run += count ? 1.0 : r.weight(j);
      if (passes(run)) hit = j;
    }
  }
  const int first = -block_max(hit == INT_MAX ? INT_MIN + 1 : -hit, INT_MIN + 1);
  return first != INT_MAX ? first : block_max(last, -1);
}

__global__ void sample_kernel(const float* logits, int vocab, SampleParams spec, const double* uniforms,
                              std::int32_t* tokens, float* logprob, float* raw_logprob) {
  const std::int64_t row = blockIdx.x;
  Row r;
  r.z = logits + row * vocab;
  r.vocab = vocab;
  // Argmax, ties to the lowest id: the largest (key, −id) as one unsigned 64-bit code.
  unsigned long long best_code = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const unsigned long long code = (static_cast<unsigned long long>(key_of(r.z[j])) << 32) |
                                    static_cast<unsigned>(INT_MAX - j);
    best_code = max(best_code, code);
  }
  best_code = block_max(best_code, 0ull);
  const int best = INT_MAX - static_cast<int>(best_code & 0xffffffffull);
  r.max_logit = r.z[best];
  double sum = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) sum += exp(double(r.z[j]) - r.max_logit);
  const double raw_lse = r.max_logit + log(block_sum_d(sum));
  auto emit = [&](int t, double lp) {
    if (threadIdx.x != 0) return;
    tokens[row] = t;
    logprob[row] = float(lp);
    raw_logprob[row] = float(double(r.z[t]) - raw_lse);
  };
  if (spec.greedy) return emit(best, 0.0);

  r.inv_t = 1.0 / spec.temperature;
  const double u = uniforms[row];
  const bool top_k = spec.top_k > 0 && spec.top_k < vocab;
  if (!top_k && !(spec.top_p < 1.0)) {
    // The whole vocabulary in id order: the first id where the running mass passes u·total.
    const double total = mass_from(r, 0, false);
    const int pick = first_crossing(r, true, 0, 0.0, u * total, true, false);
    return emit(pick, log(r.weight(pick) / total));
  }
  if (top_k) {
    const unsigned kk = bisect(r, double(spec.top_k), false, true);
    const double above = kk == UINT_MAX ? 0.0 : mass_from(r, kk + 1, true);
    r.top_k = Cut{kk, first_crossing(r, false, kk, above, double(spec.top_k), false, true)};
  }
  double total = mass_from(r, 0, false);
  if (spec.top_p < 1.0) {
    const double target = spec.top_p * total;
    const unsigned kp = bisect(r, target, false, false);
    const double above = kp == UINT_MAX ? 0.0 : mass_from(r, kp + 1, false);
    r.top_p = Cut{kp, first_crossing(r, false, kp, above, target, false, false)};
    total = mass_from(r, 0, false);
  }
  const double target = u * total;
  const unsigned kd = bisect(r, target, true, false);
  const double above = kd == UINT_MAX ? 0.0 : mass_from(r, kd + 1, false);
  int pick = first_crossing(r, false, kd, above, target, true, false);
  if (pick < 0) {
    // The draw passed the whole mass (rounding): the last candidate in the order, as on the
    // CPU: the smallest key, and the largest id among those, as the largest (~key, id).
    unsigned long long last = 0;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
      if (r.in(j)) last = max(last, (static_cast<unsigned long long>(~key_of(r.z[j])) << 32) | unsigned(j));
    }
    pick = static_cast<int>(block_max(last, 0ull) & 0xffffffffull);
  }
  emit(pick, log(r.weight(pick) / total));
}

}  // namespace

void sample(cudaStream_t s, const float* logits, std::int64_t rows, std::int64_t vocab, const SampleParams& spec,
            const double* uniforms, std::int32_t* tokens, float* logprob, float* raw_logprob) {
  if (rows <= 0) return;
  if (vocab <= 0 || vocab > 0x7ffffffe) throw std::invalid_argument("sample: vocabulary size out of range");
  if (rows > 0x7fffffff) throw std::invalid_argument("sample: more than 2^31 rows");
  sample_kernel<<<unsigned(rows), kThreads, 0, s>>>(logits, int(vocab), spec, uniforms, tokens, logprob, raw_logprob);
  check_launch("sample");
}

}  // namespace braid::backend::cuda
