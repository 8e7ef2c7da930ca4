// One supervised fine-tuning step on a whole model (first and last stage): for each
// micro-batch forward, the chunked LM-head logprobs of the next tokens, the mean
// negative log-likelihood over the tokens marked as targets, backward; then one
// AdamW update with the gradients averaged over the micro-batches and clipped by
// global norm. braid-train's SFT mode and the engine's SFT test run on this.
#pragma once

#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::train {

struct SftExample {
  std::vector<std::int32_t> tokens;
  // Per token: 1 where the token is to be learnt (a response token), 0 for context
  // (the prompt). Empty: every token after the first is learnt.
  std::vector<std::uint8_t> learn;
};

struct SftOptions {
  optim::AdamWConfig adamw;
  optim::LrSchedule lr;
  std::int64_t max_tokens = 4096;    // tokens in one micro-batch (activations are sized for this)
  std::int64_t max_sequences = 64;   // sequences in one micro-batch
  std::int64_t head_chunk_rows = 128;
};

struct SftStepResult {
  double loss = 0;        // mean over micro-batches of each one's mean NLL
  double grad_norm = 0;   // before clipping
  double lr = 0;
  std::int64_t target_tokens = 0;
};

class SftTrainer {
 public:
  SftTrainer(model::Model& m, SftOptions opt);

  // One optimizer step over the given micro-batches (each a list of examples).
  SftStepResult step(std::span<const std::vector<SftExample>> micro_batches);
  // Mean NLL of the examples without changing the model.
  double evaluate(std::span<const SftExample> batch);

  const optim::AdamW& optimizer() const { return adamw_; }

 private:
  // Forward + logprobs of one micro-batch; fills targets_ (masked) and logprob_.
  double forward_loss(std::span<const SftExample> batch, double scale, std::int64_t* counted);

  model::Model* m_;
  SftOptions opt_;
  optim::AdamW adamw_;
  rl::ChunkedLmHead<float> head_;
  model::Activations acts_;
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<std::int64_t> offsets_;
  std::vector<std::uint8_t> mask_;
  std::vector<float> logprob_, d_logprob_;
  backend::Buffer<float> logprob_dev_, d_logprob_dev_;
  backend::Buffer<std::int32_t> targets_dev_;
};

}  // namespace braid::train
