// Picking the next token from a row of logits: greedy, or temperature, top-k and
// top-p (nucleus) sampling, each sequence with its own random stream.
//
// Reproducibility: a sequence's stream is Rng(seed, sample_id), and each sampled
// token draws exactly one uniform from it, so a sequence's samples depend only on
// (seed, sample_id) and its own logits — not on which other sequences share the
// batch, nor on the order they finish in. Ties (equal logits) go to the lowest id.
// The stream's state after n tokens is therefore a function of (seed, sample_id, n):
// a sampler built with position n continues a sequence exactly where another
// process stopped it (migration, lib/generate/migrate.hpp).
//
// Logprobs: every Sampled carries two.
//   logprob      under the distribution actually sampled from: softmax(logits / T)
//                restricted to the top-k / top-p set and renormalised. Greedy is a
//                deterministic policy: logprob 0. This is the behaviour policy's
//                probability (what importance ratios of off-policy corrections need).
//   raw_logprob  log_softmax(logits) at temperature 1 over the whole vocabulary: the
//                model's own probability, what PPO's old-policy logprob is compared to
//                when the trainer recomputes logprobs without sampling transforms.
#pragma once

#include "core/rng.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::gen {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int top_k = 0;             // 0: off; 1 is greedy
  double top_p = 1.0;        // 1: off; keeps the smallest most-likely set with mass >= top_p
  std::uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0 || top_k == 1; }
};

struct Sampled {
  std::int32_t token = 0;
  float logprob = 0;      // under the sampling policy (after temperature, top-k, top-p)
  float raw_logprob = 0;  // under softmax(logits), temperature 1, no truncation
};

// Throws UsageError for a negative temperature or top_k, or top_p outside (0, 1].
void validate(const SamplingParams& p);

class SequenceSampler {
 public:
  // position: response tokens the sequence already has (their draws are skipped).
  SequenceSampler(const SamplingParams& params, std::uint64_t sample_id, std::int64_t position = 0);

  Sampled sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  Rng rng_;
  std::vector<std::int32_t> order_;  // scratch: candidate ids, most likely first
  std::vector<double> weight_;       // scratch: their unnormalised probabilities
};

// Row i of logits [rows x vocab] sampled by *samplers[i] into out[i], rows in
// parallel on the CPU backend's thread pool. Each sampler draws from its own
// stream, so the tokens do not depend on how the rows are split.
void sample_rows(std::span<SequenceSampler* const> samplers, const float* logits, std::int64_t vocab,
                 std::span<Sampled> out);

}  // namespace braid::gen
