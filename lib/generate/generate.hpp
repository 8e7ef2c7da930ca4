// Generation: prefill + paged KV-cache decode with continuous batching.
//
// Up to max_batch sequences run together, each in a KV-cache slot. Every step is
// one forward_cached call holding a one-token decode segment per running sequence
// and a prefill segment per prompt that joined this step. A sequence leaves the
// batch when it samples a stop token (kept as the last response token) or reaches
// max_new_tokens / max_len; its slot is cleared, its blocks go back to the pool, and
// the next waiting prompt takes the slot at the following step. Samples are reported
// as they finish.
//
// The KV cache is a pool of blocks (model.hpp) sized from the memory left after the
// weights and activations: on a device, its free memory less a reserve; on the host, a
// budget (kv_cache_bytes, default kDefaultHostKvBytes). The pool is never larger than
// max_batch sequences at their longest. A pool that cannot hold one sequence at its
// longest is refused up front (InputError with the figures: exit 2 in a tool). A prompt
// joins only when the pool has its blocks; when a decode step needs a block and none is
// free, the sequence that joined last is preempted: its blocks are freed and it waits,
// first in line, as a continuation (prompt + response so far, re-prefilled when it
// resumes, its sampler advanced past its draws), so it samples what it would have.
//
// On a backend with graphs (CUDA), a step that only decodes runs as a graph captured
// once per batch-size bucket (decode_graph.hpp); GenerateOptions::graphs or the
// environment variable BRAID_CUDA_GRAPHS=0 turns that off.
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

// The host's KV-cache budget when GenerateOptions::kv_cache_bytes is 0.
inline constexpr std::int64_t kDefaultHostKvBytes = std::int64_t{4} << 30;
// On a device: memory kept free beside the pool (cuBLAS, graphs, fragmentation), the larger
// of this and kDeviceReserveFraction of the device.
inline constexpr std::int64_t kDeviceReserveBytes = std::int64_t{1} << 30;
inline constexpr double kDeviceReserveFraction = 0.05;

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
  // The paged KV cache: tokens per block, and the pool's bytes (0: the device's free
  // memory less the reserve, or kDefaultHostKvBytes on the host). Keys and values are
  // stored as the weights are (bf16 weights: a bf16 cache), else as f32.
  int kv_block_size = 16;
  std::int64_t kv_cache_bytes = 0;
  // Decode steps as CUDA graphs where the backend has them (and BRAID_CUDA_GRAPHS != 0).
  bool graphs = true;
  // Where kv_cache_bytes came from, for the refusal's message (a tool's option name).
  std::string kv_cache_option = "--kv-cache-mb";
};

struct GenerateStats {
  std::int64_t steps = 0;
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  double prefill_seconds = 0;   // forward time of steps that prefilled (decode rows included)
  double decode_seconds = 0;    // forward time of pure decode steps
  std::int64_t preemptions = 0;     // sequences sent back to wait because the pool was full
  std::int64_t kv_blocks = 0;       // blocks in the pool
  std::int64_t kv_block_tokens = 0;
  std::int64_t kv_bytes = 0;
  std::int64_t kv_peak_blocks = 0;  // most blocks held at once
  std::int64_t graph_steps = 0;     // decode steps replayed as graphs
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
  // The pool's blocks for `slots` sequences of up to cache_len tokens; InputError when it
  // cannot hold one of the longest (longest tokens).
  std::int64_t pool_blocks(int slots, std::int64_t cache_len, std::int64_t longest, backend::DType dtype) const;

  const model::Model* m_;
  GenerateOptions opt_;
};

// run() collected into prompt order.
std::vector<Sample> generate(const model::Model& m, std::span<const Prompt> prompts, const GenerateOptions& opt,
                             GenerateStats* stats = nullptr);

}  // namespace braid::gen
