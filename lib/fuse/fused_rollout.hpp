// The fused rollout: braid-generate's ranks score the finished shards themselves, in
// process, once generation frees them (RLHFuse section 4.2), instead of a braid-score
// reading the pipe:
//
//   mpirun -np 2 braid-generate --actor a.h5 --prompts p.jsonl -o gen --migrate-threshold 0.25
//       --migrate-to 1 --threads 1 -- -o scored --ref a.h5 --critic c.h5 --reward-rule digits --threads 1
//
// Everything after `--` is braid-score's options (score/options.hpp), without the shard
// list. A rank is free when its generation is over: a migration sender once it has
// handed its unfinished shards over, a receiver (or any rank without migration) once
// its last shard is written. A free rank asks rank 0's board (score_board.hpp) for a
// finished shard, scores it with braid-score's own code (score::ScoreSession: the same
// passes, advantages and files as `braid-generate | braid-score -`), and asks again,
// until every shard is scored. Rank 0 answers between its generation steps and between
// the shards it scores itself. stdout carries the scored shards' paths; the generation
// --stats gain each rank's "fusion" times, and braid-score's --stats (after `--`) is
// written once, by rank 0, for all ranks (score::merge_stage_stats).
#pragma once

#include "generate/stage.hpp"
#include "score/command.hpp"

#include <string>
#include <vector>

namespace braid::gen {
class RankGroup;
}

namespace braid::fuse {

// A command line cut at its first "--": the words before it (argv[0] first) and after it.
struct SplitCommandLine {
  std::vector<char*> before;        // argv for the generation's parser (argc = size)
  std::vector<std::string> after;   // braid-score's options
  bool fused = false;               // a "--" was there
};
SplitCommandLine split_at_double_dash(int argc, char** argv);

// braid-score's options from the words after "--" (score::add_score_options);
// UsageError naming them when they do not parse. `command_line` becomes meta.created_by.
score::CommandOptions parse_score_options(const std::vector<std::string>& words, const std::string& command_line);

// What fusion needs beyond each stage's own checks: under GRPO a shard must hold whole
// groups (its scorer computes their advantages alone), so --shard-size must be a
// multiple of --samples-per-prompt. UsageError otherwise.
void validate(const gen::StageOptions& g, const score::CommandOptions& s);

// Runs generation with fused scoring on every rank; returns the exit code.
int run_fused_rollout(const gen::StageOptions& g, const score::CommandOptions& s, const gen::RankGroup& ranks);

}  // namespace braid::fuse
