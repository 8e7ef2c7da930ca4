// braid-schedgen: the fused actor/critic pipeline schedule (RLHFuse §5.2),
// found by simulated annealing on every MPI rank, checked by a dry run of its
// instruction streams, written as braid.schedule JSON. Its options:
// lib/sched/option_schema.cpp.
#include "comm/job.hpp"
#include "core/cli.hpp"
#include "core/log.hpp"
#include "io/fingerprint.hpp"
#include "sched/option_schema.hpp"
#include "sched/schedgen.hpp"

int main(int argc, char** argv) {
  // MPI starts only under mpirun: one process searches without it (comm/job.hpp).
  braid::comm::Job job(&argc, &argv);
  braid::comm::Communicator* world = &job.world();
  CLI::App app{
      "Find the fused pipeline schedule of several models (actor, critic, ...) training in one bidirectional "
      "pipeline (RLHFuse §5.2): greedy fusion, then simulated annealing on every MPI rank, then a pass that lowers "
      "peak activation memory; writes braid.schedule JSON with per-device subtasks and instruction streams. "
      "The annealer's knobs: --preset, then the spec's \"anneal\" block (docs/tools/schedgen.md).\n"
      "Run many seeds at once with: mpirun -np N braid-schedgen spec.json -o schedule.json",
      "braid-schedgen"};
  braid::sched::SchedgenOptions opt;
  braid::cli::add_schema_options(app, opt, braid::sched::schedgen_schema());
  return braid::cli::run(app, argc, argv, [&] {
    if (world->rank() != 0 && braid::log::level() > braid::log::Level::warn) braid::log::set_level(braid::log::Level::warn);
    braid::sched::finish_command_line(app, opt);
    if (!opt.verify.empty()) return braid::sched::verify_schedule_file(opt, world->rank());
    // What made the schedule: the search's options (the rank count among them: the result is a
    // function of spec, options and ranks) and the spec by content.
    const std::vector<std::string> not_recorded = {"spec", "--output", "--svg", "--verify", "--quiet", "--verbose",
                                                   "--version"};
    braid::io::MadeFrom record("braid-schedgen");
    record.set_options(braid::cli::option_values(app, not_recorded), braid::cli::options_given(app, not_recorded));
    record.set_option("ranks", std::to_string(world->size()));
    record.add_input_path("spec", opt.spec);
    opt.made_from = record.to_json();
    return braid::sched::run_schedgen(opt, *world);
  });
}
