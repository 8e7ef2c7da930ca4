// braid-score's command: its flags as a plain struct, their combinations checked in one
// place, and the run (tokenizer, models, the shard stream, stats). tools/score/main.cpp
// only declares the flags. docs/tools/score.md describes the behaviour.
#pragma once

#include "backend/dtype.hpp"
#include "score/batch_scorer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::score {

inline constexpr double kDefaultKlCoef = 0.05;

struct CommandOptions {
  std::vector<std::string> inputs;   // shard paths, or the single "-" (paths on stdin)
  std::string out_dir;
  std::string ref, critic, reward, reward_rule;
  std::string reward_cmd;            // an external scorer's command line (scorer_process.hpp)
  std::string reward_cmd_dir;        // its working directory ("" = ours)
  double reward_cmd_timeout = 600;   // seconds to wait for its next answer
  std::string tokenizer = "byte";
  std::string algorithm = "ppo";
  std::optional<double> kl_coef;     // unset: kDefaultKlCoef with a reference, 0 without
  double gamma = 1.0;
  double lambda = 0.95;
  double std_eps = 1e-6;
  std::int64_t samples_per_prompt = 0;
  std::int64_t micro_tokens = 4096;
  std::string prefix = "scored";
  int threads = 0;
  std::string device = "cpu";        // backend/registry.hpp
  backend::DType dtype = backend::DType::f32;   // storage of the models' weights (--dtype)
  std::string stats;
  std::string command_line;          // stored as meta.created_by
};

// The settings the flags mean. UsageError (exit 2, naming the flags) for a combination
// that cannot run; a warning for flags GRPO ignores (--critic, --kl-coef).
ScoreSettings settings_from(const CommandOptions& o);

// Scores every input; returns the exit code.
int run_command(const CommandOptions& o);

}  // namespace braid::score
