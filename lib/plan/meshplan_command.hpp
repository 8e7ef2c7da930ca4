// braid-meshplan's command: its options as a plain struct, declared once in a schema
// (core/option_schema.hpp: tools/meshplan/main.cpp adds them, `braid options
// braid-meshplan` prints them), and the run that plans and writes plan.json.
// docs/tools/meshplan.md describes the behaviour and docs/formats-plan.md the files.
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/option_schema.hpp"
#include "plan/search.hpp"

namespace braid::plan {

struct MeshplanOptions {
  std::string experiment;              // braid.experiment
  std::string cluster;                 // braid.cluster
  std::string profile;                 // a braid.profile, or
  std::string hardware;                // the analytic profile of a preset or a hardware file
  std::string output = "plan.json";    // '-': stdout, and no summary
  std::string schedule;                // a braid.schedule of the fused training stage
  SearchOptions search;                // method, time limit, iterations, seed
  int max_micro = 32;                  // most micro-batches of a generation or inference call
  bool no_inter_fusion = false;
  bool no_intra_fusion = false;
  std::vector<std::string> fix;        // pins, NAME=dDtTpP[xM]
};

const cli::OptionSchema<MeshplanOptions>& meshplan_schema();

// Plans (o from the command line `app`, whose option values the plan records) and writes
// o.output; prints the summary line. 0: a plan found; 3: even the best plan found exceeds
// device memory (the plan is still written); UsageError without --profile or --hardware,
// or with both.
int run_meshplan(const CLI::App& app, const MeshplanOptions& o);

}  // namespace braid::plan
