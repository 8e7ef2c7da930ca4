// Generation: prefill + KV-cache decode with continuous batching.
//
// Up to max_batch sequences run together, each in a KV-cache slot. Every step is
// one forward_cached call holding a one-token decode segment per running sequence
// and a prefill segment per prompt that joined this step. A sequence leaves the
// batch when it samples a stop token (kept as the last response token) or reaches
// max_new_tokens / max_len; its slot is cleared and the next waiting prompt takes it
// at the following step. Samples are reported as they finish.
//
// Each sequence samples with its own SequenceSampler(params, sample_id) (sampler.hpp),
// so its tokens do not depend on the batch around it, provided the model's logits for
// a sequence do not (they do not on the CPU backend; see docs/engine-io.md).
//
// A run can be stopped after any step (a hook says so); the unfinished samples come
// back as continuations: prompts that carry the response so far, which a later run
// (here or in another process) prefills and goes on with, its sampler advanced past
// the draws already taken.
#pragma once

#include "generate/sampler.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace braid::gen {

struct Prompt {
  std::uint64_t sample_id = 0;
  std::vector<std::int32_t> tokens;  // at least one (a BOS will do)
  // A continuation: the response generated so far and its logprobs (all the same
  // length; empty for a fresh prompt). Prefilled together with the prompt.
  std::vector<std::int32_t> response;
  std::vector<float> logprobs;
  std::vector<float> raw_logprobs;
};

enum class FinishReason { stop, length };
const char* to_string(FinishReason r);

struct Sample {
  std::uint64_t sample_id = 0;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> response;
  std::vector<float> logprobs;      // per response token, under the sampling policy
  std::vector<float> raw_logprobs;  // per response token, softmax(logits) at temperature 1
  FinishReason finish = FinishReason::length;
};

struct GenerateOptions {
  SamplingParams sampling;
  int max_batch = 32;                    // sequences decoding together (KV-cache slots)
  std::int64_t max_new_tokens = 256;
  std::int64_t max_len = 0;              // prompt + response; 0: max_position_embeddings
  std::vector<std::int32_t> stop_tokens;
  std::int64_t prefill_tokens = 2048;    // prompt tokens one step may prefill (at least one prompt)
  // Room for prompts that a step hook adds during the run: every max_batch slot, and
  // a cache for prompts of up to this many tokens (0: none will come).
  std::int64_t reserve_prompt_len = 0;
};

struct GenerateStats {
  std::int64_t steps = 0;
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  double prefill_seconds = 0;   // forward time of steps that prefilled (decode rows included)
  double decode_seconds = 0;    // forward time of pure decode steps
};

// What a step hook sees, after the step's finished samples were reported.
struct StepInfo {
  std::int64_t running = 0;   // sequences in the batch
  std::int64_t waiting = 0;   // prompts not started yet
  std::int64_t finished = 0;  // samples reported so far by this run
  std::int64_t sampled = 0;   // tokens sampled by this step
};
// Returns true to stop the run now. Prompts (continuations too) it appends to `more`
// join the waiting queue; they must fit GenerateOptions::reserve_prompt_len.
using StepHook = std::function<bool(const StepInfo&, std::vector<Prompt>& more)>;

class Generator {
 public:
  // m must be a whole model (first and last stage, with an LM head).
  Generator(const model::Model& m, GenerateOptions opt);

  // Generates for every prompt, calling on_done(sample) as each finishes (order of
  // finishing, not of prompts). Prompts join the batch in the order given.
  // after_step (optional) is called after every step and may add prompts; when it
  // returns true, run() appends every unfinished sample (running or waiting) to
  // *unfinished as a continuation and returns.
  GenerateStats run(std::span<const Prompt> prompts, const std::function<void(Sample&&)>& on_done,
                    const StepHook& after_step = {}, std::vector<Prompt>* unfinished = nullptr);

 private:
  void check(const Prompt& p) const;  // InputError naming the sample

  const model::Model* m_;
  GenerateOptions opt_;
};

// run() collected into prompt order.
std::vector<Sample> generate(const model::Model& m, std::span<const Prompt> prompts, const GenerateOptions& opt,
                             GenerateStats* stats = nullptr);

}  // namespace braid::gen
