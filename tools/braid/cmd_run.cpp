// braid run: an RL experiment (a braid.run file) as stage processes, one folder
// per iteration, resumable; the loop itself is lib/driver/run_loop.
#include <iostream>
#include <memory>
#include <optional>

#include "core/files.hpp"
#include "core/log.hpp"
#include "driver/run_lock.hpp"
#include "driver/run_loop.hpp"
#include "driver/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

int run_run(const RunCommand& o) {
  RunSpec spec = load_run_file(o.run_file);
  if (o.iterations > 0) spec.iterations = o.iterations;
  PlanOptions plan{.tools = find_tools(), .verbosity = {}, .force = o.force};
  // The stage tools talk as much as braid itself was asked to.
  if (log::level() == log::Level::quiet) plan.verbosity.emplace_back("-q");
  if (log::level() == log::Level::debug) plan.verbosity.emplace_back("-v");
  // One driver per folder, from the plan on (driver/run_lock.hpp). A dry run writes nothing
  // but a plan it has to make first, and takes the lock only then.
  std::optional<RunLock> lock;
  if (!o.dry_run || (spec.run_plan && spec.run_plan->request && !spec.run_plan->applied)) lock.emplace(o.out, "braid run");
  try {
    // A plan (made now when the run file asks for one) lays out every command below.
    const auto made = prepare_plan(spec, Layout(o.out), plan);
    if (o.dry_run) {
      for (const auto& line : made) std::cout << line << '\n';
      for (const auto& line : dry_run(spec, Layout(o.out), plan)) std::cout << line << '\n';
      return 0;
    }
    if (spec.run_plan) {
      for (const auto& line : spec.run_plan->summary()) log::info("{}", line.substr(2));
      for (const auto& c : spec.run_plan->conflicts) log::warn("the run file wins over the plan: {}", c);
    }
    const RunResult r = run_loop(spec, Layout(o.out), plan);
    if (r.iterations_run == 0) log::info("all {} iterations were already complete in {}", spec.iterations, o.out);
    std::cout << path_line(r.actor.string()) << '\n';
    if (!r.critic.empty()) std::cout << path_line(r.critic.string()) << '\n';
  } catch (const StageFailed& e) {
    log::error("{}", e.what());
    return e.exit_code();
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<RunCommand>();
  auto* sub = app.add_subcommand(
      "run", "Run an RL experiment (a braid.run file, docs/formats-run.md): per iteration braid-generate piped "
             "into braid-score, then braid-train, in OUT/iter-NNNN/. A rerun continues where the last stopped. "
             "Prints the final checkpoints");
  cli::add_schema_options(*sub, *o, run_schema());
  verbs.add(sub, [o] { return run_run(*o); });
}

}  // namespace braid::driver
