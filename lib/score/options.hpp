// braid-score's options, defined once: braid-score's main declares them through
// add_score_options, and braid-generate's fused mode (lib/fuse) parses the braid-score
// options that follow its `--` with the same definitions.
#pragma once

#include "score/command.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace braid::score {

// Every braid-score option except the positional shard list: -o (required), the models,
// the reward, the algorithm and its coefficients, --threads/--device/--dtype, --stats.
void add_score_options(CLI::App& app, CommandOptions& o);

}  // namespace braid::score
