// The three model passes of scoring, each a forward of a whole model over a batch's
// sequences in micro-batches (no KV cache, no backward):
//
//   ReferencePass   logprobs_ref[t] = log π_ref(token t | tokens before t), by the chunked
//                   LM head on the row t-1 that produced token t
//   ValuePass       values[t] = V(row t-1): the critic's value of the state before token t
//   RewardModelPass reward[i] = the value head at the last token of sequence i
//
// Per-token outputs run parallel to batch.tokens and hold 0 at prompt positions (and at
// a first token, which no row produced). Each pass keeps its activations between calls
// and grows them when a micro-batch needs more.
#pragma once

#include "backend/backend.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "data/micro_batches.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace braid::score {

// The work of a pass since it was made: forward + head seconds, tokens and sequences run.
struct PassTiming {
  double seconds = 0;
  std::int64_t tokens = 0;
  std::int64_t sequences = 0;
};

// Runs a whole model over micro-batches and hands each one's activations to a head.
class SequenceRunner {
 public:
  // m must be a whole model (first and last stage); std::invalid_argument otherwise.
  SequenceRunner(const model::Model& m, std::int64_t micro_tokens);

  using Head = std::function<void(const data::MicroBatch& mb, const model::Batch& packed, const model::Activations& acts)>;
  // For each micro-batch: packs its sequences (positions from 0), runs the forward, calls head.
  void run(const io::SampleBatch& b, const Head& head);

  const model::Model& model() const { return *m_; }
  const PassTiming& timing() const { return timing_; }

 private:
  const model::Model* m_;
  std::int64_t micro_tokens_;
  std::optional<model::Activations> acts_;
  std::int64_t acts_tokens_ = 0, acts_sequences_ = 0;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int64_t> offsets_;
  PassTiming timing_;
};

class ReferencePass {
 public:
  // m needs an LM head.
  ReferencePass(const model::Model& m, std::int64_t micro_tokens);
  std::vector<float> logprobs(const io::SampleBatch& b);
  const PassTiming& timing() const { return runner_.timing(); }

 private:
  SequenceRunner runner_;
  rl::ChunkedLmHead<float> head_;
  backend::Buffer<std::int32_t> targets_dev_;
  backend::Buffer<float> logprob_dev_;
  std::vector<float> logprob_;
};

class ValuePass {
 public:
  // m needs a value head.
  ValuePass(const model::Model& m, std::int64_t micro_tokens);
  std::vector<float> values(const io::SampleBatch& b);
  const PassTiming& timing() const { return runner_.timing(); }

 private:
  SequenceRunner runner_;
  backend::Buffer<float> values_dev_;
  std::vector<float> values_;
};

class RewardModelPass {
 public:
  // m needs a value head.
  RewardModelPass(const model::Model& m, std::int64_t micro_tokens);
  // One reward per sequence (0 for an empty sequence).
  std::vector<float> rewards(const io::SampleBatch& b);
  const PassTiming& timing() const { return runner_.timing(); }

 private:
  SequenceRunner runner_;
  backend::Buffer<float> values_dev_;
  std::vector<float> values_;
};

}  // namespace braid::score
