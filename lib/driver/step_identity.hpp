// What a rerun keeps, it checks for what it is, not only that it is whole: a training
// step's checkpoints that pass `braid check` and are newer than their inputs may still be
// another step's (iteration 3's actor copied over iteration 2's, the actor copied over the
// critic) or made with other settings (the run file changed since). Each checkpoint
// braid-train writes records what made it (io/fingerprint.hpp); these compare that record,
// and the step counter, with what the step would make now.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "driver/layout.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

// Why iteration i's checkpoints are not this run's iteration i (nullopt: they are, or
// they record nothing to tell by, and their steps are right): a step counter other than
// the input's + 1, a checkpoint of another model (an actor where the critic belongs), or
// a record of other inputs (another iteration's checkpoint or scored shards). The step is
// done again (`braid run` logs why).
std::optional<std::string> foreign_checkpoints(const RunSpec& spec, const Layout& layout, const PlanOptions& opt,
                                               int iteration);

// The options iteration i's checkpoints were trained with that differ from those the run
// file gives now, one line each ("--lr: 0.001 there, 0.002 now"); empty when none differ or
// nothing was recorded. `braid run` refuses such a folder (exit 2) unless --force.
std::vector<std::string> changed_train_options(const RunSpec& spec, const Layout& layout, const PlanOptions& opt,
                                               int iteration);

// What differs between the made_from record of a JSON output braid run made before (a plan
// by braid-meshplan, a schedule by braid-schedgen) and what `argv` (the tool's command line,
// argv[0] its path) makes now: another tool, an option of another value or given only on one
// side, an input of `inputs` (role, its file or its value: a hardware preset) named otherwise,
// and any file the record names whose content changed since. One line each; empty when they
// agree.
std::vector<std::string> output_record_differences(const ordered_json& record, const std::string& tool,
                                                   const std::vector<std::string>& argv,
                                                   const std::vector<std::pair<std::string, std::string>>& inputs);

// A stage tool's command line (from the tool itself, argv[0] its path) as option -> value:
// "--name value" pairs, a "--name" followed by another option or the end a flag ("true").
std::vector<std::pair<std::string, std::string>> command_options(const std::vector<std::string>& argv);

}  // namespace braid::driver
