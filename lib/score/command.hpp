// braid-score's command: its flags as a plain struct, their combinations checked in one
// place, and the run (tokenizer, models, the shard stream, stats). tools/score/main.cpp
// only declares the flags. docs/tools/score.md describes the behaviour.
#pragma once

#include "backend/dtype.hpp"
#include "core/json.hpp"
#include "model/tensor_parallel.hpp"
#include "score/batch_scorer.hpp"
#include "score/shard_stream.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::comm {
class Communicator;
}

namespace braid::score {

// braid-score's --kl-coef when it is not given and there is a reference model: the
// algorithm's (rl/algorithms.hpp: PPO 0.05, REINFORCE++ and RLOO 0.01, the others 0).
double default_kl_coef(const std::string& algorithm);

struct CommandOptions {
  std::vector<std::string> inputs;   // shard paths, or the single "-" (paths on stdin)
  std::string out_dir;
  std::string ref, critic, reward, reward_rule;
  std::string reward_cmd;            // an external scorer's command line (scorer_process.hpp)
  std::string reward_cmd_dir;        // its working directory ("" = ours)
  double reward_cmd_timeout = 600;   // seconds to wait for its next answer
  std::string tokenizer = "byte";
  std::string algorithm = "ppo";      // a name of rl/algorithms.hpp
  std::optional<double> kl_coef;     // unset: default_kl_coef(algorithm) with a reference, 0 without
  std::string kl_estimator = "k1";   // of the KL penalty in the rewards
  double gamma = 1.0;
  double lambda = 0.95;
  double std_eps = 1e-6;
  std::optional<bool> std_normalize; // group estimators; unset: the algorithm's
  std::optional<std::int64_t> overlong_buffer;  // tokens; unset: the algorithm's fraction of max_new_tokens
  double overlong_penalty = 1.0;
  std::int64_t samples_per_prompt = 0;
  std::int64_t micro_tokens = 4096;
  std::string prefix = "scored";
  int threads = 0;
  std::string device = "cpu";        // backend/registry.hpp
  backend::DType dtype = backend::DType::f32;   // storage of the models' weights (--dtype)
  int tp = 1;                        // tensor-parallel ranks per device (under mpirun)
  std::string stats;
  std::string command_line;          // stored as meta.created_by
  // The options given on the command line (cli::options_given): one given where these
  // settings never read it is refused, naming it, even at its default value.
  std::vector<std::string> options_given;
};

// The settings the flags mean. UsageError (exit 2, naming the flags) for a combination
// that cannot run; a warning for flags the algorithm ignores (--critic without one).
ScoreSettings settings_from(const CommandOptions& o);

// One braid-score run's models, scorer and shard stream, fed shard paths by its caller:
// braid-score's loop below, or a rank of the fused rollout (lib/fuse) that scores the
// shards it is given. Loads the tokenizer and the models on construction.
class ScoreSession {
 public:
  // on_output: each scored shard's path, the moment it is written. progress_total:
  // a progress line of that many sequences on stderr (0: a count without a bar); none without.
  // tp: the tensor-parallel rank and group the models are split over (their tp rank 0
  // alone writes; every rank of the group must be given the same shards in the same order).
  ScoreSession(const CommandOptions& o, std::function<void(const std::filesystem::path&)> on_output,
               std::optional<std::uint64_t> progress_total = std::nullopt, model::TensorParallel tp = {});
  ~ScoreSession();
  ScoreSession(const ScoreSession&) = delete;
  ScoreSession& operator=(const ScoreSession&) = delete;

  // Scores (or skips, when its output is already there) one input shard.
  void add(const std::string& shard);
  // The end of the input (GRPO: every group must be whole); the external scorer is waited for.
  void finish();
  const StreamTotals& totals() const;
  // This run's braid.stagestats document (score/stage_stats.hpp).
  ordered_json stats(double wall_seconds) const;

 private:
  struct Parts;
  std::unique_ptr<Parts> p_;
};

// Prints one line on stdout with a single write(): lines of several ranks never interleave.
void print_path_line(const std::string& path);

// Scores every input; returns the exit code. With `world` (mpirun, more than one rank)
// the ranks form devices of o.tp ranks each (comm::Mesh); each device scores a
// disjoint part of the inputs (score/ranks.hpp: whole GRPO groups to one device) with
// its models split o.tp ways; the device's tp rank 0 writes its outputs and prints
// their paths; rank 0 writes --stats for all. '-' (stdin) is refused there: only rank
// 0 has stdin. UsageError when o.tp does not divide the ranks, or is not 1 without
// mpirun or on a device other than the CPU.
int run_command(const CommandOptions& o, comm::Communicator* world = nullptr);

}  // namespace braid::score
