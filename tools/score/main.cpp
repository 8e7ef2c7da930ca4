// braid-score: the reference, critic and reward passes over sample shards, then PPO's
// KL-penalised GAE or GRPO's group advantages -> scored shards (docs/tools/score.md).
// Under mpirun the ranks score disjoint parts of the shards (score/ranks.hpp).
#include "comm/job.hpp"
#include "core/cli.hpp"
#include "core/shell.hpp"
#include "score/command.hpp"
#include "score/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  // MPI starts only under mpirun (comm/job.hpp); one process scores without it.
  braid::comm::Job job(&argc, &argv);
  braid::comm::Communicator* world = job.under_mpi() ? &job.world() : nullptr;
  CLI::App app{"Score sample shards for RL: reference logprobs, critic values and rewards, then PPO's "
               "KL-penalised GAE (or GRPO's group advantages). Prints each scored shard's path on stdout as it "
               "is written. Under mpirun each rank scores its part of the shards (whole GRPO groups).",
               "braid-score"};
  braid::score::CommandOptions o;
  app.add_option("shards", o.inputs, "Sample shards (braid-generate's), or '-' to read their paths from stdin, "
                                     "one a line, scoring each as it arrives")
      ->required();
  braid::score::add_score_options(app, o);
  std::vector<std::string> words(argv, argv + argc);
  if (!words.empty()) words.front() = "braid-score";
  o.command_line = braid::shell_line(words);
  const int rc = braid::cli::run(app, argc, argv, [&] {
    o.options_given = braid::cli::options_given(app, {});
    return braid::score::run_command(o, world);
  });
  if (rc != 0 && world && world->size() > 1) {
    // A failed rank leaves without finalising MPI: mpirun then ends the whole job
    // instead of leaving the other ranks waiting for this one.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
