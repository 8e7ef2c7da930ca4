// braid-train's options, declared once (core/option_schema.hpp): the options every mode
// shares, the policy modes' (ppo adds its critic's), the text modes' (sft, rm, dpo) and
// dpo's own. tools/train/main.cpp adds them through add_train_commands; the run file's
// "train" section is checked against train_run_file_specs; `braid options` prints them.
#pragma once

#include "core/option_schema.hpp"
#include "train/options.hpp"

#include <CLI/CLI.hpp>

#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace braid::train {

const cli::OptionSchema<CommonTrainOptions>& common_schema();
// A policy mode's: its inputs and outputs, the loss's switches, the common options; with
// ppo the critic's too.
cli::OptionSchema<RlCommand> rl_schema(bool ppo);
// sft and rm: the data, the model in and out (--actor or, rm, --reward), the tokenizer, the
// common options.
cli::OptionSchema<TextCommand> text_schema(const std::string& mode);
// dpo: text_schema("dpo") and the reference, β, the loss, length normalisation.
cli::OptionSchema<DpoCommand> dpo_schema();

// The options the run file's "train" section may set under `algorithm` (those with a key).
std::vector<cli::OptionSpec> train_run_file_specs(const std::string& algorithm);

// braid-train's modes, each a subcommand of app holding its options.
struct TrainCommandLine {
  std::deque<std::pair<CLI::App*, RlCommand>> rl_modes;   // one per algorithm (rl/algorithms.hpp)
  TextCommand sft, rm;
  DpoCommand dpo;
  CLI::App* sft_cmd = nullptr;
  CLI::App* rm_cmd = nullptr;
  CLI::App* dpo_cmd = nullptr;
};
void add_train_commands(CLI::App& app, TrainCommandLine& cl);

}  // namespace braid::train
