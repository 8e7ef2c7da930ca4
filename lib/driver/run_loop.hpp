// `braid run`: the RL loop as processes. Steps run in order the way make would
// run them (a step is due when an output is missing or older than an input), so
// a rerun continues where the last one stopped and a finished run does nothing.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "driver/layout.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"
#include "driver/spawn.hpp"

namespace braid::driver {

// A stage tool failed; the run stops. exit_code is what braid run exits with:
// the tool's own (2 for bad input), or 1 when a signal ended it.
class StageFailed : public std::runtime_error {
 public:
  StageFailed(const std::string& step, const ProcessFailure& f);
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// Whether a step must run: an output missing, or older than the newest input.
bool step_due(const Step& step);

// Runs one step (clearing its stale outputs first); throws StageFailed.
void execute_step(const Step& step);
// Runs several steps at once (each one's pipeline beside the others'); throws StageFailed
// for the first to fail, after ending the others.
void execute_steps(const std::vector<Step>& steps);

struct RunResult {
  int iterations_run = 0;                  // iterations whose training ran now
  std::filesystem::path actor, critic;     // the final checkpoints (critic empty under GRPO)
};

// A run file's plan, before any step (driver/run_plan.hpp): braid-meshplan makes it into
// OUT/plan.json when the run file asks for one (when missing or older than its inputs or
// the run file), it is checked against the run and applied (InputError under "plan"), and
// where it fuses the training, braid-schedgen makes the fused schedule of its schedspec
// into OUT/plan.schedule.json (when missing or older than the schedspec). Returns what it
// ran or kept, as comment lines for --dry-run, which runs them too: every later command
// line depends on the plan. Throws StageFailed when a tool fails.
std::vector<std::string> prepare_plan(RunSpec& spec, const Layout& layout, const PlanOptions& opt);

// Whether OUT can hold the run's files: OUT a folder, or one that can be made (its nearest
// existing parent a folder this process may write in). UsageError naming the path
// otherwise, before anything runs: braid run and --dry-run alike.
void check_output_folder(const std::filesystem::path& out);

// Runs every due step of every iteration (the caller holds the folder: driver/run_lock.hpp),
// writes each iteration's metrics.json
// and OUT/metrics.jsonl, and logs one summary line per iteration trained now.
RunResult run_loop(const RunSpec& spec, const Layout& layout, const PlanOptions& opt);

// What run_loop would start, as shell lines (generate | score on one line, the
// shards to train on as a glob), without starting anything: like make -n, every
// step after a due one counts as due, since it reads what that one rewrites.
std::vector<std::string> dry_run(const RunSpec& spec, const Layout& layout, const PlanOptions& opt);

}  // namespace braid::driver
