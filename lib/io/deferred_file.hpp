// The deferred file of an overcommitted generation as stored (format "braid.deferred",
// version 1; docs/formats.md): flat arrays, checked on read, so that braid inspect and
// braid check read it without the generator (gen::Deferred in generate/deferred.hpp is
// what braid-generate resumes from, made from these arrays).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace braid::io {

inline constexpr const char* kDeferredFormat = "braid.deferred";
inline constexpr int kDeferredVersion = 1;

// /finished: 0 = still running, 1 = ended by a stop token, 2 = by length.
inline constexpr std::int32_t kDeferredRunning = 0, kDeferredStop = 1, kDeferredLength = 2;

struct DeferredArrays {
  std::int64_t policy_step = 0;   // the actor step of the run that wrote it
  std::int64_t next_prompt = 0;   // the prompt stream's next fresh prompt index
  std::string config;             // the writer's settings (JSON text)
  std::vector<std::int32_t> tokens;        // prompt and response so far, sequence after sequence
  std::vector<std::int64_t> offsets{0};    // n + 1 entries into tokens
  std::vector<std::int32_t> prompt_len;    // per sequence
  std::vector<std::int64_t> sample_id;     // per sequence, strictly increasing
  std::vector<std::int32_t> finished;      // per sequence (kDeferred*)
  std::vector<float> logprobs;             // per response token: under the sampling distribution
  std::vector<float> raw_logprobs;         // per response token: at temperature 1, unrestricted
  std::vector<std::int64_t> token_policy_step;  // per response token: the step that sampled it

  std::size_t size() const { return prompt_len.size(); }
  std::size_t response_tokens() const { return logprobs.size(); }
};

// Atomically (temp file, fsync, rename), the completeness sentinel last.
void write_deferred_file(const std::filesystem::path& path, const DeferredArrays& d);
// Every array's length, the offsets, prompt lengths, ids, finish codes, finite logprobs
// and steps in 0..policy_step checked: InputError naming the file and the dataset.
DeferredArrays read_deferred_file(const std::filesystem::path& path);

}  // namespace braid::io
