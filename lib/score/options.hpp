// braid-score's options, declared once (core/option_schema.hpp): braid-score's main adds
// them through add_score_options, braid-generate's fused mode (lib/fuse) parses the
// braid-score options that follow its `--` with the same definitions, the run file's
// "score" section is checked against the ones with a key, and `braid options` prints them.
#pragma once

#include "core/option_schema.hpp"
#include "score/command.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace braid::score {

const cli::OptionSchema<CommandOptions>& score_schema();

// Every braid-score option except the positional shard list: -o (required), the models,
// the reward, the algorithm and its coefficients, --threads/--device/--dtype, --stats.
void add_score_options(CLI::App& app, CommandOptions& o);

}  // namespace braid::score
