// braid-train: PPO, GRPO, SFT, reward-model and DPO updates (lib/train/commands.hpp).
#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "core/shell.hpp"
#include "train/commands.hpp"
#include "train/option_schema.hpp"

#include <string>
#include <vector>

namespace {

// The options an output's record leaves out: the outputs, the inputs (recorded by their
// contents), and the settings that change how the work is cut, not its result.
const std::vector<std::string> kNotInRecord = {
    "shards", "data", "--actor", "--critic", "--reward", "--ref", "--tokenizer", "--optimizer-state",
    "--critic-optimizer-state", "--actor-out", "--critic-out", "--reward-out", "--stats", "--threads", "--device",
    "--tp", "--micro-tokens", "--recompute", "--schedule", "--force"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"braid-train: update a policy (PPO, GRPO, SFT, DPO) or a reward model from samples; writes new checkpoints "
               "(step + 1) with their AdamW state beside them (<stem>.optim.h5) and prints the checkpoint files. Under mpirun "
               "without --schedule every mode runs over ranks = devices x --tp: each model split over the tp ranks of a "
               "device, the devices data parallel (device 0 writes the checkpoints, one file per tp rank)",
               "braid-train"};
  braid::cli::add_common_options(app);
  app.require_subcommand(1);
  app.fallthrough();

  std::vector<std::string> words(argv, argv + argc);
  if (!words.empty()) words.front() = "braid-train";
  const std::string command_line = braid::shell_line(words);

  // Every mode's options: lib/train/option_schema.cpp.
  braid::train::TrainCommandLine cl;
  braid::train::add_train_commands(app, cl);

  // MPI starts only after parsing: the launcher says which rank prints usage.
  braid::cli::set_first_process(braid::comm::launcher_rank() == 0);
  return braid::cli::run(app, argc, argv, [&] {
    const auto record = [&](CLI::App* sub, braid::train::CommonTrainOptions& o) {
      o.created_by = command_line;
      if (!sub->parsed()) return;
      o.option_values = braid::cli::option_values(*sub, kNotInRecord);
      o.options_given = braid::cli::options_given(*sub, kNotInRecord);
    };
    for (auto [sub, o] : {std::pair{cl.sft_cmd, &cl.sft.common}, std::pair{cl.rm_cmd, &cl.rm.common},
                          std::pair{cl.dpo_cmd, &cl.dpo.text.common}}) {
      record(sub, *o);
    }
    for (auto& [sub, o] : cl.rl_modes) {
      record(sub, o.common);
      if (sub->parsed()) return braid::train::run_rl(o);
    }
    if (cl.sft_cmd->parsed()) return braid::train::run_sft(cl.sft);
    if (cl.dpo_cmd->parsed()) return braid::train::run_dpo(cl.dpo);
    return braid::train::run_rm(cl.rm);
  });
}
