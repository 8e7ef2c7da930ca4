#include "generate/sampler.hpp"

#include "backend/cpu/thread_pool.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace braid::gen {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) {
    throw UsageError(fmt::format("temperature must be >= 0 (0 is greedy), got {}", p.temperature));
  }
  if (p.top_k < 0) throw UsageError(fmt::format("top-k must be >= 0 (0 is off), got {}", p.top_k));
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) throw UsageError(fmt::format("top-p must be in (0, 1], got {}", p.top_p));
}

SequenceSampler::SequenceSampler(const SamplingParams& params, std::uint64_t sample_id, std::int64_t position)
    : params_(params), rng_(params.seed, sample_id) {
  validate(params);
  // One uniform per sampled token, none when greedy (sample() below).
  if (!params_.greedy()) {
    for (std::int64_t i = 0; i < position; ++i) rng_.uniform();
  }
}

Sampled SequenceSampler::sample(std::span<const float> logits) {
  const auto vocab = static_cast<std::int32_t>(logits.size());
  // Argmax with ties to the lowest id, and the log-sum-exp of the raw logits.
  std::int32_t best = 0;
  for (std::int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  const double max_logit = logits[best];
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double raw_lse = max_logit + std::log(sum);
  auto raw = [&](std::int32_t t) { return static_cast<float>(logits[t] - raw_lse); };

  if (params_.greedy()) return {best, 0.0f, raw(best)};

  const double inv_t = 1.0 / params_.temperature;
  auto weight = [&](std::int32_t t) { return std::exp((logits[t] - max_logit) * inv_t); };
  const bool truncate = (params_.top_k > 0 && params_.top_k < vocab) || params_.top_p < 1.0;

  if (!truncate) {
    // The whole vocabulary in id order: no sort needed.
    double total = 0;
    for (std::int32_t i = 0; i < vocab; ++i) total += weight(i);
    const double target = rng_.uniform() * total;
    double acc = 0;
    std::int32_t pick = vocab - 1;
    for (std::int32_t i = 0; i < vocab; ++i) {
      acc += weight(i);
      if (acc > target) { pick = i; break; }
    }
    return {pick, static_cast<float>(std::log(weight(pick) / total)), raw(pick)};
  }

  // Candidates most likely first (ties: lower id first), cut to top-k.
  order_.resize(static_cast<std::size_t>(vocab));
  std::iota(order_.begin(), order_.end(), 0);
  auto more_likely = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::size_t keep = order_.size();
  if (params_.top_k > 0 && params_.top_k < vocab) keep = static_cast<std::size_t>(params_.top_k);
  std::size_t sorted = 0;
  auto sort_prefix = [&](std::size_t k) {
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(), more_likely);
    sorted = k;
    weight_.resize(k);
    for (std::size_t i = 0; i < k; ++i) weight_[i] = weight(order_[i]);
  };
  double mass = 0;  // of the candidate set: the top-k, or the whole vocabulary
  if (keep < order_.size()) {
    sort_prefix(keep);
    for (double w : weight_) mass += w;
  } else {
    for (std::int32_t i = 0; i < vocab; ++i) mass += weight(i);
  }
  double total = mass;
  if (params_.top_p < 1.0) {
    // The nucleus is usually a small part of a large vocabulary: sort a growing
    // prefix until it holds the mass asked for, rather than sorting everything.
    for (std::size_t k = std::min<std::size_t>(keep, 64);; k = std::min(keep, k * 8)) {
      if (sorted < k) sort_prefix(k);
      double acc = 0;
      std::size_t n = 0;
      while (n < k && acc < params_.top_p * mass) acc += weight_[n++];
      if (acc >= params_.top_p * mass || k == keep) {
        keep = n;
        total = acc;
        break;
      }
    }
  }
  const double target = rng_.uniform() * total;
  double acc = 0;
  std::size_t pick = keep - 1;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += weight_[i];
    if (acc > target) { pick = i; break; }
  }
  return {order_[pick], static_cast<float>(std::log(weight_[pick] / total)), raw(order_[pick])};
}

void sample_rows(std::span<SequenceSampler* const> samplers, const float* logits, std::int64_t vocab,
                 std::span<Sampled> out) {
  // On the host thread pool the CPU backend uses (not OpenMP: see backend/cpu/thread_pool.hpp).
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / std::max<std::int64_t>(1, vocab));
  backend::cpu::parallel_for(static_cast<std::int64_t>(samplers.size()), grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto row = static_cast<std::size_t>(i);
      out[row] = samplers[row]->sample({logits + i * vocab, static_cast<std::size_t>(vocab)});
    }
  });
}

}  // namespace braid::gen
