// The deferred file of an overcommitted generation (format "braid.deferred", version 1;
// docs/formats.md): what one iteration's braid-generate started and did not put in its
// batch, for the next iteration's braid-generate to resume first. Each sample keeps its
// prompt, the response so far, both logprobs of every response token and the policy
// step that sampled each token; a finished sample whose GRPO group was not yet whole
// waits here finished. It also holds the prompt stream's cursor (the next fresh prompt).
//
// Written atomically (temp file, fsync, rename, completeness sentinel) once the batch's
// shards are all written; the next iteration reads it and writes its own, so every
// started sample is, after each iteration, in exactly one place: a batch shard or the
// newest deferred file (overcommit.hpp).
#pragma once

#include "generate/generate.hpp"
#include "io/deferred_file.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace braid::gen {

struct DeferredSample {
  Prompt prompt;                         // sample id, prompt tokens, response so far and its logprobs
  std::vector<std::int64_t> policy_steps;  // per response token: the actor step that sampled it
  bool finished = false;                 // done, waiting for the rest of its group
  FinishReason finish = FinishReason::length;  // when finished
};

struct Deferred {
  std::int64_t policy_step = 0;   // the actor step of the run that wrote it
  std::int64_t next_prompt = 0;   // the prompt stream's next fresh prompt index
  std::string config;             // the writer's settings (JSON text; see stage_config)
  std::vector<DeferredSample> samples;  // by sample id
};

void write_deferred(const std::filesystem::path& path, const Deferred& d);
// InputError naming the file and field for a missing, unfinished, damaged or
// inconsistent file (io::read_deferred_file's checks).
Deferred read_deferred(const std::filesystem::path& path);

}  // namespace braid::gen
