// OPPO's inter-step overlap (arXiv 2509.25762 §3.2) in braid-generate: overcommit, and
// defer the long tail to the next iteration instead of waiting for it.
//
// With --overcommit D the prompt file is a stream: iteration after iteration takes its
// prompts in turn (prompt index p is line p mod N of the N prompts read, wrapping), and
// sample ids run on across iterations (sample_id = p * samples_per_prompt + k), so no
// two samples of a run share an id and one --seed gives each its own random stream.
// The batch is B = N groups (a group: the samples_per_prompt samples of one prompt,
// GRPO's unit; 1 sample under PPO). An iteration
//   1. reads the previous iteration's deferred file (deferred.hpp), if any: its
//      unfinished samples are resumed first, prefilled with their partial response and
//      sampled on from where their stream stopped (not regenerated); its finished ones
//      count towards their groups at once;
//   2. fills up to B + D groups with fresh prompts from the stream's cursor;
//   3. generates until B groups are whole, then stops: those B groups (in the order they
//      became whole; ties in sample-id order) are the batch, written as shards of
//      --shard-size samples, each path printed as it is written;
//   4. writes every other started sample (unfinished: prompt, partial tokens, logprobs,
//      per-token policy steps; or finished in a group not yet whole) to the deferred file,
//      atomically, after the last shard.
// Every token records the actor step that sampled it (/policy_step in the shards): a
// resumed sample's old tokens keep their step, the new ones get this actor's.
// A rerun (after an interruption) removes this stage's shards in -o and starts over from
// the same deferred file: the batch is a function of that file, the prompts, the actor and
// the settings (deterministic on the CPU backend), so nothing is lost or written twice.
// One process only (not under mpirun, no migration).
#pragma once

#include "core/json.hpp"

#include <cstdint>

namespace braid::gen {

struct StageOptions;
class RankGroup;

// braid-generate with --overcommit. Returns the exit code (0).
int run_overcommit_stage(const StageOptions& opt, const RankGroup& ranks);

// The sample-deciding settings a deferred file must share with the run that resumes it.
inline constexpr const char* kDeferredSettingKeys[] = {"samples_per_prompt", "tokenizer", "max_new_tokens",
                                                        "temperature", "top_p", "top_k", "seed", "stop_tokens",
                                                        "batch_prompts", "prompt_seed"};

}  // namespace braid::gen
