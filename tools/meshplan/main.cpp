// braid-meshplan: a device mesh and 3D-parallel strategy per model function
// call, with stage fusion, predicted iteration time and memory -> plan.json.
// Its options and its run: lib/plan/meshplan_command.hpp.
#include "core/cli.hpp"
#include "plan/meshplan_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Plans an RLHF iteration: a device mesh and (dp, tp, pp, micro-batches) per model function call,\n"
      "searched with Metropolis-Hastings over a profile-based cost model (or enumerated when the space is\n"
      "small), with inter-stage (generation/inference) and intra-stage (actor/critic training) fusion.\n"
      "Writes plan.json and prints a one-line summary on stdout.",
      "braid-meshplan"};
  braid::plan::MeshplanOptions o;
  braid::cli::add_schema_options(app, o, braid::plan::meshplan_schema());
  app.footer("Exit status: 0 plan found; 2 bad input or command line; 3 even the best plan found exceeds device\n"
             "memory (the plan is still written). Formats: docs/formats-plan.md; how it plans: docs/tools/meshplan.md.");
  return braid::cli::run(app, argc, argv, [&] { return braid::plan::run_meshplan(app, o); });
}
