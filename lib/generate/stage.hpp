// braid-generate's work: actor rollouts for every prompt x samples_per_prompt,
// written as sample shards (shard_plan.hpp) that stream out as they complete, each
// path printed on stdout the moment its file is committed. Resumable: a rerun skips
// complete shards. Under mpirun the shards are dealt round-robin to the devices (a
// device: one rank, or with --tp N a group of N ranks generating the same samples with
// the model split across them, whose tp rank 0 alone writes), and --migrate-threshold
// moves the long tail to a few devices (migrate.hpp).
#pragma once

#include "backend/dtype.hpp"
#include "core/json.hpp"
#include "data/order.hpp"
#include "data/prompts.hpp"
#include "generate/sampler.hpp"
#include "model/config.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace braid::gen {

class RankGroup;

// The most samples of one prompt (a GRPO group) braid-generate takes.
inline constexpr int kMaxSamplesPerPrompt = 65536;

struct StageOptions {
  std::string actor;                 // checkpoint spec (checkpoint::open_model)
  std::string prompts;               // JSON Lines (prompts.hpp)
  std::string out_dir;
  std::string tokenizer = "byte";
  std::string tools;                 // a JSON file of tool schemas for conversations without their own
  std::string chat_template_kwargs;  // a JSON object of template keyword arguments, under each line's own
  std::string prefix = "gen";
  std::string stats;                 // braid.stagestats JSON ("" = none, "-" = stdout is not allowed)
  int samples_per_prompt = 1;         // in [1, kMaxSamplesPerPrompt]
  std::int64_t max_new_tokens = 64;
  SamplingParams sampling{.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 0};
  int max_batch = 32;
  // The paged KV cache's pool in MiB (0: the device's free memory less a reserve, or 4 GiB
  // on the host); decode steps as CUDA graphs (on a GPU). Neither changes the samples.
  double kv_cache_mb = 0;
  bool cuda_graphs = true;
  int shard_size = 16;
  std::int64_t limit = 0;            // first N prompts (0: all)
  // The prompt stream (data/order.hpp) over the prompts read: this call's batch is
  // batch_prompts of them (0: all) from stream position first_prompt, epoch after epoch
  // in file order or, with a prompt seed, in each epoch's seeded shuffle. With overcommit
  // the batch is batch_prompts groups and the position comes from the deferred file.
  std::int64_t first_prompt = 0;
  std::int64_t batch_prompts = 0;
  std::optional<std::uint64_t> prompt_seed;
  int threads = 0;                   // CPU backend threads (0: all cores)
  std::string device = "cpu";        // backend/registry.hpp
  backend::DType dtype = backend::DType::f32;   // storage of the actor's weights (--dtype)
  int tp = 1;                        // tensor-parallel ranks per device (RankGroup::split_tp)
  std::string migrate_threshold;     // "" = off; a count or a fraction (migrate.hpp)
  int migrate_to = 1;
  // Overcommit and defer (overcommit.hpp): extra groups started beyond the batch; -1: off
  // (fixed shards of every prompt, nothing carried between iterations).
  int overcommit = -1;
  std::string resume_deferred;       // the previous iteration's deferred file ("" = none)
  std::string deferred_out;          // where this iteration's deferred samples go (required with overcommit)
  std::string created_by;            // the command line, for meta.created_by
  // The options given on the command line (cli::options_given): one given where these
  // settings never read it is refused, naming it, even at its default value.
  std::vector<std::string> options_given;
};

// What a caller that joins another stage to generation (lib/fuse: scoring on the ranks
// that generation frees) hooks into the run. Every hook is optional.
struct StageHooks {
  // A shard of this rank is complete on disk (written now, or found complete by a rerun):
  // called instead of printing its path. Runs on the shard writer's thread or the main one.
  std::function<void(std::int64_t shard, const std::filesystem::path& path)> shard_ready;
  // Called on the main thread after every generation step (waiting = false) and, with
  // waiting = true, in each round of a rank that is done and waits for the migration
  // decision; must return quickly.
  std::function<void(bool waiting)> poll;
  // This rank's generation is over (its shards written or handed over; generate_seconds
  // since its first step); runs before the ranks' stats are gathered. What it returns is
  // kept as this rank's "fusion" entry in the stats.
  std::function<ordered_json(double generate_seconds)> after_generation;
};

// The checks every way of generating shares (what is required, the ranges, the
// sampling settings); UsageError naming the option.
void validate_stage_options(const StageOptions& o);
// The pool's bytes for GenerateOptions::kv_cache_bytes (0: automatic).
std::int64_t kv_cache_bytes(const StageOptions& o);
// UsageError when --max-new-tokens cannot fit the actor's positions (cfg, once it is loaded).
void require_positions(const StageOptions& o, const model::ModelConfig& cfg);
// meta.config of the shards: the stage's settings (JSON), which a rerun compares, and the
// actor's vocab_size (every token id of a shard lies below it: io/sample_shard.hpp).
ordered_json stage_config(const StageOptions& o, std::int64_t prompts, const std::vector<std::int32_t>& stop,
                          std::int32_t vocab_size);

// What made the shards, as their made_from attribute (io/fingerprint.hpp): "braid-generate",
// the settings of `config` (stage_config's, file names left out), the actor, prompts and
// tokenizer by content.
std::string generation_record(const StageOptions& o, const ordered_json& config);

// The stream of o's prompts over `lines` read (data/order.hpp).
data::EpochOrder prompt_order(const StageOptions& o, std::int64_t lines);
// Without overcommit: the lines of this call's batch, positions [first_prompt, first_prompt
// + batch) of the stream (batch: batch_prompts, or every line).
std::vector<data::PromptLine> batch_lines(const StageOptions& o, const std::vector<data::PromptLine>& all);
// The "data" figures of a call's stats: the stream position and epoch it started at, the
// prompts it took, the lines read and the next position.
ordered_json stream_stats(const StageOptions& o, std::int64_t lines, std::int64_t first, std::int64_t taken);

// A written shard's path on standard output, one line in one write() as braid-score reads
// it (core/files.hpp's path_line: an odd name as a JSON string).
void print_shard_path(const std::string& path);

// Returns the exit code (0). Errors are exceptions (InputError for bad input).
int run_generate_stage(const StageOptions& opt, const RankGroup& ranks, const StageHooks& hooks = {});

}  // namespace braid::gen
