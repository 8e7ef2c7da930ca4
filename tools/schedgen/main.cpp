// braid-schedgen: the fused actor/critic pipeline schedule (RLHFuse §5.2),
// found by simulated annealing on every MPI rank, checked by a dry run of its
// instruction streams, written as braid.schedule JSON.
#include <limits>

#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/option_schema.hpp"
#include "io/fingerprint.hpp"
#include "sched/anneal.hpp"
#include "sched/schedgen.hpp"

namespace {
namespace sched = braid::sched;
using namespace braid::cli::option_types;
CLI::Validator bounds(const braid::Bounds& b, braid::cli::OptionType type) { return braid::cli::bounds_validator(b, type); }
}  // namespace

int main(int argc, char** argv) {
  braid::comm::MpiRuntime mpi(&argc, &argv);
  const auto world = braid::comm::mpi_world();
  CLI::App app{
      "Find the fused pipeline schedule of several models (actor, critic, ...) training in one bidirectional "
      "pipeline (RLHFuse §5.2): greedy fusion, then simulated annealing on every MPI rank, then a pass that lowers "
      "peak activation memory; writes braid.schedule JSON with per-device subtasks and instruction streams.\n"
      "Run many seeds at once with: mpirun -np N braid-schedgen spec.json -o schedule.json",
      "braid-schedgen"};
  braid::sched::SchedgenOptions opt;
  app.add_option("spec", opt.spec, "braid.schedspec JSON, or a braid.plan from braid-meshplan (its fused training stage); '-' for stdin");
  app.add_option("-o,--output", opt.output, "Where to write the braid.schedule JSON ('-' for stdout)")
      ->capture_default_str();
  app.add_option("--svg", opt.svg, "Also draw the timeline and memory of every device to this SVG file");
  app.add_option("--verify", opt.verify,
                 "Instead: dry-run the instruction streams of this braid.schedule file and check its makespan");
  app.add_option("--start", opt.start,
                 "Anneal from the greedy fusion (the paper's choice), from 1F1B model after model (lower memory, "
                 "slower to the bound), or both: greedy, then, if that reached the bound within a tenth of the budget, "
                 "1F1B with the budget left (at most 35% of it), the lower peak winning (docs/tools/schedgen.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"both", "greedy", "1f1b"}));
  // Every number is checked as a number, finite and in its bounds, before CLI11 converts it: unsigned
  // counts would wrap "-1" to 2^64 - 1 (an endless run), and CLI11's own checks let nan through. The
  // bounds are those a schedule's "search" record is read back with (sched/anneal.hpp).
  app.add_option("--seed", opt.anneal.seed, "Random seed (rank r uses stream r)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSearchCount}, integer));
  app.add_option("--iterations", opt.anneal.iterations,
                 "Neighbours per rank (0: no cap); alone (no --time-limit) the result depends on spec, seed and rank "
                 "count only")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSearchCount}, integer));
  app.add_option("--time-limit", opt.anneal.time_limit, "Seconds of latency search per rank (0: none); the memory pass then runs until 1.5x this from the start")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSeconds}, number));
  app.add_option("--t0", opt.anneal.t0, "Initial temperature (0: --t0-factor x the mean subtask duration)")->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxTemperature}, number));
  app.add_option("--t0-factor", opt.anneal.t0_factor, "Without --t0: the initial temperature in mean subtask durations")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxFactor, .exclusive_min = true}, number));
  app.add_option("--t0-cycle", opt.anneal.t0_cycle,
                 "Factors of t0 the rounds start at, in turn (rank r starts at the r-th)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(bounds({.min = 0, .max = std::numeric_limits<double>::max(), .exclusive_min = true}, number));
  app.add_option("--alpha", opt.anneal.alpha, "Geometric cooling factor per iteration")
      ->capture_default_str()
      ->check(bounds({.min = 0.5, .max = 1.0}, number));
  app.add_option("--epsilon", opt.anneal.epsilon, "Reheat below this temperature (0: t0 x 1e-4)")->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxTemperature}, number));
  app.add_option("--mem-weight", opt.anneal.mem_weight,
                 "Memory in the latency search's energy: makespan + w x (mean subtask / mean act_mem) x peak")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxFactor}, number));
  std::string tie_break = braid::sched::tie_break_name(opt.anneal.tie_break);
  app.add_option("--tie-break", tie_break,
                 "What orders schedules of equal makespan: the number of subtasks on a longest path, the sum of "
                 "device finishing times, of subtask ends, the peak activation memory, or nothing (flat plateaus)")
      ->capture_default_str()
      ->check(CLI::IsMember({"critical", "finish", "flow", "none", "memory"}));
  app.add_option("--tie-weight", opt.anneal.tie_weight, "Scale of the tie-break against the temperature")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxFactor}, number));
  app.add_flag("!--no-restart", opt.anneal.restart_from_best,
               "At a reheat, anneal on from where the walk stands instead of going back to the best schedule");
  app.add_option("--chain-moves", opt.anneal.chain_moves,
                 "Share of the latency search's proposals that shift one micro-batch's forwards or backwards one "
                 "place on every device at once")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = 1}, number));
  app.add_option("--mem-chain-moves", opt.anneal.mem_chain_moves, "The same share in the memory pass")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = 1}, number));
  app.add_option("--mem-level-margin", opt.anneal.mem_level_margin,
                 "The memory pass's energy counts the memory above its lowest peak so far less M mean activation "
                 "memories, never below serial 1F1B's peak (a large M: all the memory above serial 1F1B's peak)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxFactor}, number));
  app.add_option("--mem-polish", opt.anneal.mem_polish,
                 "After a memory pass that stalls with time left, every other pass goes on from the last one's "
                 "result for this many neighbours, colder (0: every pass starts from a latency search's schedule)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSearchCount}, integer));
  app.add_flag("!--no-mem-resequence", opt.anneal.mem_resequence,
               "Do not give each device, after every memory pass, the order with its lowest peak that keeps the "
               "others' times (a dynamic program over its chains; skipped on devices whose grid has over 8M "
               "points, 33M for the devices at the highest peak)");
  app.add_option("--mem-exact-nodes", opt.anneal.mem_exact_nodes,
                 "Last, on problems whose device grids are small (Table 3's GBS 8 and 16), take the peak down "
                 "level by level by a depth-first search over the devices' orders with the windows of every "
                 "subtask propagated, for at most N nodes (0: not at all; under a time limit, for half of the "
                 "memory phase instead)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSearchCount}, integer));
  app.add_option("--critical-moves", opt.anneal.critical_moves,
                 "Share of the latency search's swaps (the proposals that are not chain moves) drawn at a subtask "
                 "on a longest path, with its neighbour before or after it on its device, instead of anywhere")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = 1}, number));
  app.add_option("--sync-every", opt.anneal.sync_every,
                 "MPI: ranks meet every N valid neighbours to stop together and share the best schedule")
      ->capture_default_str()
      ->check(bounds({.min = 1, .max = sched::kMaxSearchCount}, integer));
  app.add_option("--sync-seconds", opt.anneal.sync_seconds,
                 "MPI, under --time-limit without --iterations: ranks meet every S seconds instead, so that none "
                 "waits for a slower one (0: every --sync-every neighbours)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSeconds}, number));
  app.add_flag("!--no-share", opt.anneal.share_best,
               "MPI: ranks do not take a better rank's schedule as the best to restart from at their next reheat "
               "(they still stop together)");
  app.add_option("--mem-t0-factor", opt.anneal.mem_t0_factor,
                 "The memory pass's initial temperature, in mean activation memories of a subtask")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxFactor, .exclusive_min = true}, number));
  app.add_option("--mem-iterations", opt.anneal.mem_iterations,
                 "Neighbours of the memory pass (0: until the time is up, or 20M without a time limit; it also stops "
                 "at serial 1F1B's peak)")
      ->capture_default_str()
      ->check(bounds({.min = 0, .max = sched::kMaxSearchCount}, integer));
  return braid::cli::run(app, argc, argv, [&] {
    if (world->rank() != 0 && braid::log::level() > braid::log::Level::warn) braid::log::set_level(braid::log::Level::warn);
    if (!opt.verify.empty()) {
      if (!opt.spec.empty()) throw braid::UsageError("give either a spec or --verify FILE, not both");
      return braid::sched::verify_schedule_file(opt, world->rank());
    }
    if (opt.spec.empty()) throw braid::UsageError("a schedspec file is required (or --verify FILE)");
    // What made the schedule: the search's options (the rank count among them: the result is a
    // function of spec, options and ranks) and the spec by content.
    const std::vector<std::string> not_recorded = {"spec", "--output", "--svg", "--verify", "--quiet", "--verbose",
                                                   "--version"};
    braid::io::MadeFrom record("braid-schedgen");
    record.set_options(braid::cli::option_values(app, not_recorded), braid::cli::options_given(app, not_recorded));
    record.set_option("ranks", std::to_string(world->size()));
    record.add_input_path("spec", opt.spec);
    opt.made_from = record.to_json();
    opt.anneal.tie_break = braid::sched::parse_tie_break(tie_break);
    // An iteration budget alone makes the result a function of spec, seed and rank
    // count; the default time limit applies only when no budget is given.
    if (opt.anneal.iterations > 0 && app.count("--time-limit") == 0) opt.anneal.time_limit = 0;
    if (opt.anneal.iterations == 0 && opt.anneal.time_limit == 0) {
      throw braid::UsageError("--iterations 0 with --time-limit 0 would never stop; set one of them");
    }
    return braid::sched::run_schedgen(opt, *world);
  });
}
