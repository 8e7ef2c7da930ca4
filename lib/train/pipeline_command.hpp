// braid-train ppo|grpo --schedule schedule.json under mpirun: the fused pipeline
// (train/pipeline.hpp) in place of the single-process trainer, with the same inputs,
// mini-batches (epoch e shuffled by Rng(seed, e)), outputs and --stats document.
#pragma once

#include "train/commands.hpp"

namespace braid::train {

// Every rank reads the shards named on the command line (not "-": under mpirun only
// one rank has stdin) and runs its stages; rank 0 prints the checkpoint files (the
// stage files of each model) and writes --stats. Each mini-batch is cut into the
// schedule's K x M micro-batches; --micro-tokens caps their size (a larger one is a
// UsageError naming the way out). PPO trains the schedule's "actor" and "critic",
// GRPO its "actor" alone.
int run_fused_rl(const RlCommand& c);

}  // namespace braid::train
