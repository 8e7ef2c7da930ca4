// braid-schedgen's work, callable from any tool: build the problem from a spec,
// anneal on every rank of a communicator, lower and dry-run the winner, write
// braid.schedule JSON (and an SVG); or verify an existing schedule file by a dry run.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/json.hpp"
#include "sched/anneal.hpp"

namespace braid::sched {

struct SchedgenOptions {
  std::string spec;           // braid.schedspec path ("-": stdin)
  std::string output = "-";   // braid.schedule path ("-": stdout)
  std::string svg;            // also draw the timeline here, when set
  std::string verify;         // the schedule file verify_schedule_file() checks
  std::string start = "both";  // "greedy", "1f1b", or "both" (greedy, then 1F1B with what is left if at the bound within a tenth of the budget)
  std::string preset = "default";  // the annealer's knobs by name (sched/option_schema.hpp)
  AnnealOptions anneal;
  ordered_json made_from;     // the schedule's record of what made it (io/fingerprint.hpp; the tool makes it)
  // The knobs (their "anneal" keys) the command line gave: they go over the spec's
  // "anneal" block and the preset (settle_knobs).
  std::vector<std::string> knobs_given;
};

// Finds, checks and writes the schedule; returns the exit code. Collective over world
// (the search runs on every rank); only rank 0 writes.
int run_schedgen(SchedgenOptions opt, comm::Communicator& world);

// Dry-runs the instruction streams of opt.verify and compares the makespan; 0 when
// they run as predicted, 2 (with the step x device grid on stderr) when not.
int verify_schedule_file(const SchedgenOptions& opt, int rank);

}  // namespace braid::sched
