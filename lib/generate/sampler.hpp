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
//
// The sampling itself is a backend op (backend::Ops::sample) reading the logits where
// they are; a SequenceSampler holds a sequence's parameters and random stream and hands
// the op one draw per token. sample() is the same computation on a host row.
#pragma once

#include "backend/backend.hpp"
#include "backend/cpu/kernels.hpp"
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
  backend::SamplingSpec spec() const { return {.temperature = temperature, .top_k = top_k, .top_p = top_p}; }
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

  // The uniform draw for the sequence's next token, what Ops::sample takes for its row:
  // one per token from the stream, none (0) when greedy.
  double draw();
  // draw() and the sampling on a host row of logits.
  Sampled sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  Rng rng_;
  backend::cpu::SampleScratch scratch_;
};

// Rows of logits in device memory sampled by the backend (Ops::sample): row i with
// samplers[i]'s draw. The logits stay where they are; the draws go in and a token and
// two logprobs per row come back. All samplers must share the sampling parameters
// (seeds and positions may differ).
class RowSampler {
 public:
  RowSampler(backend::Backend& be, const SamplingParams& params, std::size_t max_rows);

  void sample(const float* logits, std::int64_t vocab, std::span<SequenceSampler* const> samplers,
              std::span<Sampled> out);

  // sample() in three parts, for a decode step replayed as a graph (decode_graph.hpp): the
  // draws uploaded (rows beyond the samplers' draw 0), the op on `rows` rows of logits
  // (device work only: it can be captured), the first out.size() results brought back.
  void upload_draws(std::span<SequenceSampler* const> samplers, std::size_t rows);
  void sample_on_device(const float* logits, std::size_t rows, std::int64_t vocab);
  void download(std::span<Sampled> out);

 private:
  backend::Backend* be_;
  backend::SamplingSpec spec_;
  std::size_t max_rows_;
  backend::Buffer<double> uniforms_;
  backend::Buffer<std::int32_t> tokens_;
  backend::Buffer<float> logprobs_, raw_logprobs_;
  std::vector<double> host_uniforms_;
  std::vector<std::int32_t> host_tokens_;
  std::vector<float> host_logprobs_, host_raw_logprobs_;
};

}  // namespace braid::gen
