// Which sample goes into which output shard, and what a finished shard holds.
//
// Samples are numbered sample_id = prompt_index * samples_per_prompt + k. Shard k
// holds the samples [k * shard_size, (k + 1) * shard_size) (the last one fewer), in
// sample-id order, and is written the moment its last sample finishes. Its contents
// therefore depend only on the prompts and the settings, never on the scheduling:
// a rerun can tell a complete shard from a missing one, and regenerates exactly the
// missing ones (resumption), and several processes can each own some shards.
#pragma once

#include "generate/generate.hpp"
#include "io/sample_shard.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace braid::gen {

struct ShardPlan {
  std::int64_t prompts = 0;
  int samples_per_prompt = 1;
  int shard_size = 16;
  std::filesystem::path dir;
  std::string prefix = "gen";

  std::int64_t samples() const { return prompts * samples_per_prompt; }
  std::int64_t shards() const { return (samples() + shard_size - 1) / shard_size; }
  std::int64_t shard_of(std::int64_t sample_id) const { return sample_id / shard_size; }
  std::int64_t first_sample(std::int64_t shard) const { return shard * shard_size; }
  std::int64_t end_sample(std::int64_t shard) const { return std::min(samples(), (shard + 1) * shard_size); }
  std::int64_t size_of(std::int64_t shard) const { return end_sample(shard) - first_sample(shard); }
  // dir/<prefix>-<5-digit shard>.h5
  std::filesystem::path path(std::int64_t shard) const;
};

// A finished shard's batch: samples in sample-id order, prompt + response tokens,
// logprobs/actor = each response token's raw logprob (temperature 1), 0 on the prompt,
// and, when `origins` (indexed by sample id) is given, each sample's prompt origin.
io::SampleBatch shard_batch(std::span<const Sample> samples, std::span<const io::PromptOrigin> origins = {});

// What a rerun finds at a shard's path.
enum class ShardState { missing, complete, stale };

// Checks the file at plan.path(shard) against what this run would write there: the
// same sample ids, the same prompts, the same settings (`config`, braid-generate's
// meta.config JSON; keys that do not change the samples are ignored) and policy step.
// missing: no file, or an unreadable/unfinished one (the reason goes to `why`);
// stale: the ids differ (a changed --limit makes a new last shard); complete: skip it.
// A shard made with other settings or prompts, or by another policy step, is an
// InputError naming the file and the difference: mixing runs in one folder is refused.
// With `origins` (indexed by sample id), a shard's samples must also carry the extra
// fields of their prompt lines (a shard without them, written before they were kept,
// is stale); the line numbers may differ. With `made_from` (the record this run gives its
// shards, io/fingerprint.hpp), a shard recording another actor's content (the same step,
// other weights) is an InputError too.
ShardState check_existing_shard(const ShardPlan& plan, std::int64_t shard, std::span<const Prompt> prompts,
                                const std::string& config, std::int64_t policy_step, std::string* why,
                                std::span<const io::PromptOrigin> origins = {}, const std::string& made_from = "");

}  // namespace braid::gen
