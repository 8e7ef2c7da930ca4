// Sampling a token per row of logits (Ops::sample). One row at a time is the host
// reference too: gen::SequenceSampler calls sample_row directly.
#include "backend/cpu/kernels.hpp"
#include "backend/cpu/thread_pool.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace braid::backend::cpu {

template <typename T>
void sample_row(const T* logits, std::int64_t vocab_size, const SamplingSpec& spec, double uniform,
                SampleScratch& scratch, std::int32_t* token, T* logprob, T* raw_logprob) {
  const auto vocab = static_cast<std::int32_t>(vocab_size);
  // Argmax with ties to the lowest id, and the log-sum-exp of the raw logits.
  std::int32_t best = 0;
  for (std::int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  const double max_logit = logits[best];
  double sum = 0;
  for (std::int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  const double raw_lse = max_logit + std::log(sum);
  auto emit = [&](std::int32_t t, double lp) {
    *token = t;
    *logprob = static_cast<T>(lp);
    *raw_logprob = static_cast<T>(static_cast<double>(logits[t]) - raw_lse);
  };

  if (spec.greedy()) return emit(best, 0.0);

  const double inv_t = 1.0 / spec.temperature;
  auto weight = [&](std::int32_t t) { return std::exp((static_cast<double>(logits[t]) - max_logit) * inv_t); };
  const bool truncate = (spec.top_k > 0 && spec.top_k < vocab) || spec.top_p < 1.0;

  if (!truncate) {
    // The whole vocabulary in id order: no sort needed.
    double total = 0;
    for (std::int32_t i = 0; i < vocab; ++i) total += weight(i);
    const double target = uniform * total;
    double acc = 0;
    std::int32_t pick = vocab - 1;
    for (std::int32_t i = 0; i < vocab; ++i) {
      acc += weight(i);
      if (acc > target) { pick = i; break; }
    }
    return emit(pick, std::log(weight(pick) / total));
  }

  // Candidates most likely first (ties: lower id first), cut to top-k.
  std::vector<std::int32_t>& order = scratch.order;
  std::vector<double>& w = scratch.weight;
  order.resize(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::size_t keep = order.size();
  if (spec.top_k > 0 && spec.top_k < vocab) keep = static_cast<std::size_t>(spec.top_k);
  std::size_t sorted = 0;
  auto sort_prefix = [&](std::size_t k) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), more_likely);
    sorted = k;
    w.resize(k);
    for (std::size_t i = 0; i < k; ++i) w[i] = weight(order[i]);
  };
  double mass = 0;  // of the candidate set: the top-k, or the whole vocabulary
  if (keep < order.size()) {
    sort_prefix(keep);
    for (double x : w) mass += x;
  } else {
    for (std::int32_t i = 0; i < vocab; ++i) mass += weight(i);
  }
  double total = mass;
  if (spec.top_p < 1.0) {
    // The nucleus is usually a small part of a large vocabulary: sort a growing
    // prefix until it holds the mass asked for, rather than sorting everything.
    for (std::size_t k = std::min<std::size_t>(keep, 64);; k = std::min(keep, k * 8)) {
      if (sorted < k) sort_prefix(k);
      double acc = 0;
      std::size_t n = 0;
      while (n < k && acc < spec.top_p * mass) acc += w[n++];
      if (acc >= spec.top_p * mass || k == keep) {
        keep = n;
        total = acc;
        break;
      }
    }
  }
  const double target = uniform * total;
  double acc = 0;
  std::size_t pick = keep - 1;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += w[i];
    if (acc > target) { pick = i; break; }
  }
  emit(order[pick], std::log(w[pick] / total));
}

template <typename T>
void sample(const T* logits, std::int64_t rows, std::int64_t vocab, const SamplingSpec& spec, const double* uniforms,
            std::int32_t* tokens, T* logprob, T* raw_logprob) {
  // Rows are independent (own logits, own draw), so they run in parallel.
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / std::max<std::int64_t>(1, vocab));
  parallel_for(rows, grain, [&](std::int64_t begin, std::int64_t end) {
    thread_local SampleScratch scratch;
    for (std::int64_t i = begin; i < end; ++i) {
      sample_row<T>(logits + i * vocab, vocab, spec, uniforms[i], scratch, tokens + i, logprob + i, raw_logprob + i);
    }
  });
}

#define BRAID_INSTANTIATE(T)                                                                                \
  template void sample_row<T>(const T*, std::int64_t, const SamplingSpec&, double, SampleScratch&,         \
                              std::int32_t*, T*, T*);                                                      \
  template void sample<T>(const T*, std::int64_t, std::int64_t, const SamplingSpec&, const double*,        \
                          std::int32_t*, T*, T*);
BRAID_INSTANTIATE(float)
BRAID_INSTANTIATE(double)
#undef BRAID_INSTANTIATE

}  // namespace braid::backend::cpu
