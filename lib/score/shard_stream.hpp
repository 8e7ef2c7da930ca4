// Scoring shard after shard as their paths arrive (from the command line or, one line
// at a time, from a pipe: generation and scoring overlap, RLHFuse §4).
//
// Outputs keep the inputs' names and sequences: gen-00003.h5 becomes
// <prefix>-00003.h5 holding exactly the sequences of gen-00003.h5 in their order (a
// name without a trailing -<digits> becomes <prefix>-<name>.h5). Each output is
// written atomically and reported (on_output) the moment it is committed.
//
// PPO (and REINFORCE++) writes each output as soon as its input is scored. A group
// estimator (GRPO, RLOO, ...) needs every sample of a group (sample_id /
// samples_per_prompt) for the group's mean and spread, and a group
// may straddle shards: a scored shard waits in memory until every group it touches is
// whole, then is written; shards that become ready together are written in the order
// their inputs came. At the end of the input, a group still incomplete is an error
// naming the group and the shards that wait for it.
//
// Resumption: an input whose output already exists, is complete, and holds as many
// sequences with rewards, advantages and returns, is skipped (logged) and its output
// reported again, so a rerun of an interrupted pipeline hands the next stage the whole
// set. Under GRPO its rewards are read back to complete the groups it shares. Each
// output records what made it (io/fingerprint.hpp: the settings, the models and the
// input shard by content); an output made from anything else is refused (InputError
// naming every difference), not skipped.
#pragma once

#include "core/json.hpp"
#include "core/progress.hpp"
#include "io/fingerprint.hpp"
#include "io/sample_shard.hpp"
#include "rl/grpo.hpp"
#include "score/batch_scorer.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace braid::comm {
class Communicator;
}

namespace braid::score {

struct StreamOptions {
  std::filesystem::path out_dir;
  std::string prefix = "scored";
  std::string created_by;            // this command line, stored as meta.created_by
  json score_config = json::object();  // this stage's settings, stored under "score" in meta.config
  std::int64_t samples_per_prompt = 0;  // GRPO; 0: read from the inputs' config
  // The tensor-parallel group scoring these shards together (nullptr at tp 1): its rank
  // 0 decides whether an input is already scored (the others follow, so they all run
  // the same passes) and alone writes and reports the outputs.
  comm::Communicator* tp_group = nullptr;
  // What makes every output but its input shard (added per input); none: nothing recorded
  // or compared.
  std::optional<io::MadeFrom> made_from;
};

struct StreamTotals {
  std::int64_t shards_scored = 0;
  std::int64_t shards_skipped = 0;
  std::int64_t sequences = 0;         // scored in this run
  std::int64_t tokens = 0;
  std::int64_t response_tokens = 0;
  double reward_sum = 0;
  double kl_sum = 0;                  // Σ over response tokens of logp_actor - logp_ref (with a reference)
};

// The output an input maps to (see above).
std::filesystem::path output_path(const std::filesystem::path& out_dir, const std::string& input,
                                  const std::string& prefix);

// meta.config of an output: the input's history (its config under its "stage", or its
// keys when it is already a history) plus {"score": score_config}. InputError naming
// the file when the input's config is not a JSON object.
std::string forward_config(const std::string& input_config, const json& score_config, const std::string& file);

// samples_per_prompt of the generation a shard came from (its meta.config, or the
// "generate" entry of a history); 0 when it does not say.
std::int64_t samples_per_prompt_in_config(const std::string& config);

// max_new_tokens of the generation a shard came from; 0 when it does not say.
std::int64_t max_new_tokens_in_config(const std::string& config);

// The prompt file a shard was generated from, as braid-generate was given it (its
// meta.config, or the "generate" entry of a history); "" when it does not say.
std::string prompts_file_of(const std::string& config);

class ShardStream {
 public:
  ShardStream(BatchScorer& scorer, StreamOptions opt, std::function<void(const std::filesystem::path&)> on_output,
              Progress* progress = nullptr);

  // Scores (or skips) one input shard and writes whatever became ready.
  void add(const std::string& input);
  // The end of the input: InputError when a GRPO group is still incomplete.
  void finish();

  const StreamTotals& totals() const { return totals_; }

 private:
  struct Pending {
    std::string input;
    std::filesystem::path output;
    io::SampleShard shard;
    std::set<std::int64_t> groups;
  };

  // record: what would make out now (empty: nothing recorded).
  bool already_done(const std::string& input, const std::filesystem::path& out, const ordered_json& record);
  bool writes() const;  // not a tp rank other than its group's first
  std::int64_t samples_per_prompt_of(const io::SampleShardMeta& meta, const std::string& input);
  void record_rewards(const io::SampleBatch& b, const std::string& input);
  void write(const std::filesystem::path& out, io::SampleShard& shard, const std::string& input);
  void write_ready_groups();

  BatchScorer* scorer_;
  StreamOptions opt_;
  std::function<void(const std::filesystem::path&)> on_output_;
  Progress* progress_;
  StreamTotals totals_;
  std::map<std::filesystem::path, std::string> outputs_;  // output -> the input it came from
  std::optional<rl::GroupRewards> groups_;
  std::map<std::int64_t, std::string> sample_origin_;     // GRPO: sample_id -> input, to name duplicates
  std::vector<Pending> pending_;
  std::int64_t skipped_sequences_ = 0;  // of the input already_done last found done
};

}  // namespace braid::score
