// braid-schedgen: the fused actor/critic pipeline schedule (RLHFuse §5.2),
// found by simulated annealing on every MPI rank, checked by a dry run of its
// instruction streams, written as braid.schedule JSON.
#include <fmt/format.h>

#include <string>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/dryrun.hpp"
#include "sched/lower.hpp"
#include "sched/schedule_json.hpp"
#include "sched/search.hpp"
#include "sched/svg.hpp"

namespace {

using namespace braid;
using namespace braid::sched;

struct Options {
  std::string spec;
  std::string output = "-";
  std::string svg;
  std::string verify;
  std::string start = "greedy";
  AnnealOptions anneal;
};

int verify(const Options& opt, int rank) {
  if (rank != 0) return 0;
  const LoadedSchedule s = load_schedule(load_json_file(opt.verify), opt.verify);
  const DryRun run = dry_run(s.problem, s.lowered);
  if (!run.ok) {
    log::error("{}: the instruction streams do not run: {}", opt.verify, run.problem);
    if (!run.grid.empty()) log::write(log::Level::quiet, "", "\n" + run.grid);
    return 2;
  }
  if (!same_time(run.makespan, s.makespan)) {
    log::error("{}: the instruction streams run in {:.6g}, the file says makespan {:.6g}", opt.verify, run.makespan,
               s.makespan);
    return 2;
  }
  log::info("{}: instruction streams run deadlock-free in {:.6g}, as predicted", opt.verify, run.makespan);
  return 0;
}

int generate(Options opt, int rank) {
  const Problem p = build_problem(load_schedspec(opt.spec));
  const LowerBound lb = lower_bound(p);
  const BaselineResult serial = serial_1f1b(p.spec);

  // Start from greedy fusion; under a tight memory cap it may get stuck, then
  // from the models' 1F1B one after the other.
  Order start;
  Timing greedy_timing;
  if (auto g = greedy(p)) {
    start = *g;
    greedy_timing = evaluate(p, start);
  } else {
    start = one_f_one_b(p);
    const Timing t = evaluate(p, start);
    if (p.spec.mem_capacity && t.peak_memory > *p.spec.mem_capacity * (1 + 1e-12)) {
      throw InputError(opt.spec, "mem_capacity",
                       fmt::format("is {:.6g}, below the {:.6g} that even 1F1B of one model after another needs",
                                   *p.spec.mem_capacity, t.peak_memory));
    }
    log::warn("greedy fusion gets stuck under mem_capacity {:.6g}; starting from 1F1B", *p.spec.mem_capacity);
    greedy_timing = t;
  }
  if (rank == 0) {
    log::info("{} devices, {} subtasks; lower bound {:.6g} ({}), serial 1F1B {:.6g}, greedy {:.6g}", p.devices,
              p.num_tasks, lb.value, lb.binding, serial.makespan, greedy_timing.makespan);
  }

  Progress progress("annealing", 0, "it");
  double last_rate_time = 0;
  std::uint64_t last_iters = 0;
  const AnnealReport report = [&](std::uint64_t iters, double current, double best) {
    const double now = progress.elapsed_seconds();
    const double rate = now > last_rate_time ? static_cast<double>(iters - last_iters) / (now - last_rate_time) : 0;
    if (now - last_rate_time > 0.5) {
      last_rate_time = now;
      last_iters = iters;
    }
    progress.set(iters);
    progress.set_status(fmt::format("now {}  current {:.6g}  best {:.6g}  bound {:.6g}", format_rate(rate, "it"), current,
                                    best, lb.value));
  };
  opt.anneal.mem_target = serial.peak_memory;
  if (opt.start == "1f1b") start = one_f_one_b(p);
  const SearchResult found = parallel_search(p, start, lb.value, opt.anneal, report);
  progress.finish();
  if (rank != 0) return 0;

  const Timing timing = evaluate(p, found.best.order);
  if (!timing.valid) throw std::runtime_error("the search returned an invalid schedule: " + timing.problem);
  const Lowered lowered = lower(p, found.best.order, timing);
  const DryRun run = dry_run(p, lowered);
  if (!run.ok || !same_time(run.makespan, timing.makespan)) {
    log::error("dry run: {}", run.ok ? fmt::format("runs in {:.6g}, predicted {:.6g}", run.makespan, timing.makespan) : run.problem);
    if (!run.grid.empty()) log::write(log::Level::quiet, "", "\n" + run.grid);
    throw std::runtime_error("the lowered instruction streams do not match the schedule");
  }

  ScheduleSummary summary;
  summary.lower_bound = lb.value;
  summary.lower_bound_binding = lb.binding;
  summary.serial_makespan = serial.makespan;
  summary.serial_peak = serial.peak_memory;
  summary.greedy_makespan = greedy_timing.makespan;
  summary.greedy_peak = greedy_timing.peak_memory;
  summary.search = {{"ranks", found.ranks},
                    {"winner_rank", found.winner},
                    {"iterations", found.total_iterations},
                    {"seconds", found.seconds},
                    {"seed", opt.anneal.seed},
                    {"start", opt.start},
                    {"time_limit", opt.anneal.time_limit},
                    {"iterations_limit", opt.anneal.iterations},
                    {"t0", opt.anneal.t0},
                    {"alpha", opt.anneal.alpha},
                    {"epsilon", opt.anneal.epsilon},
                    {"mem_weight", opt.anneal.mem_weight},
                    {"dry_run_makespan", run.makespan}};
  write_text_file(opt.output, schedule_to_json(p, found.best.order, timing, lowered, summary).dump(1) + "\n");
  if (!opt.svg.empty()) write_text_file(opt.svg, schedule_svg(p, found.best.order, timing, serial.peak_memory));

  log::info("makespan {:.6g} ({}; bound {:.6g}), {:.3f}x serial 1F1B, {:.3f}x greedy; peak memory {:.6g} = {:.2f}x "
            "serial 1F1B; {} iterations on {} rank(s) in {:.1f} s",
            timing.makespan, same_time(timing.makespan, lb.value) ? "lower bound reached" : "above the lower bound",
            lb.value, serial.makespan / timing.makespan, greedy_timing.makespan / timing.makespan, timing.peak_memory,
            serial.peak_memory > 0 ? timing.peak_memory / serial.peak_memory : 0.0, found.total_iterations,
            found.ranks, found.seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  CLI::App app{
      "Find the fused pipeline schedule of several models (actor, critic, ...) training in one bidirectional "
      "pipeline (RLHFuse §5.2): greedy fusion, then simulated annealing on every MPI rank, then a pass that lowers "
      "peak activation memory; writes braid.schedule JSON with per-device subtasks and instruction streams.\n"
      "Run many seeds at once with: mpirun -np N braid-schedgen spec.json -o schedule.json",
      "braid-schedgen"};
  Options opt;
  app.add_option("spec", opt.spec, "braid.schedspec JSON ('-' for stdin)");
  app.add_option("-o,--output", opt.output, "Where to write the braid.schedule JSON ('-' for stdout)")
      ->capture_default_str();
  app.add_option("--svg", opt.svg, "Also draw the timeline and memory of every device to this SVG file");
  app.add_option("--verify", opt.verify,
                 "Instead: dry-run the instruction streams of this braid.schedule file and check its makespan");
  app.add_option("--start", opt.start,
                 "Anneal from the greedy fusion (the paper's choice) or from 1F1B model after model (sometimes "
                 "lower memory, sometimes slower to the bound; docs/schedgen.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"greedy", "1f1b"}));
  app.add_option("--seed", opt.anneal.seed, "Random seed (rank r uses stream r)")->capture_default_str();
  app.add_option("--iterations", opt.anneal.iterations, "Neighbours per rank (0: no cap)")->capture_default_str();
  app.add_option("--time-limit", opt.anneal.time_limit, "Seconds of latency search per rank (0: none); the memory pass gets up to half as much again")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--t0", opt.anneal.t0, "Initial temperature (0: a tenth of the mean subtask duration)")->capture_default_str();
  app.add_option("--alpha", opt.anneal.alpha, "Geometric cooling factor per iteration")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 1.0));
  app.add_option("--epsilon", opt.anneal.epsilon, "Reheat below this temperature (0: t0 x 1e-4)")->capture_default_str();
  app.add_option("--mem-weight", opt.anneal.mem_weight,
                 "Memory in the latency search's energy: makespan + w x (mean subtask / mean act_mem) x peak")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mem-iterations", opt.anneal.mem_iterations,
                 "Neighbours of the memory pass (it also stops at half the time limit, or at serial 1F1B's peak)")
      ->capture_default_str();
  return braid::cli::run(app, argc, argv, [&] {
    if (mpi.rank() != 0 && braid::log::level() > braid::log::Level::warn) braid::log::set_level(braid::log::Level::warn);
    if (!opt.verify.empty()) {
      if (!opt.spec.empty()) throw braid::UsageError("give either a spec or --verify FILE, not both");
      return verify(opt, mpi.rank());
    }
    if (opt.spec.empty()) throw braid::UsageError("a schedspec file is required (or --verify FILE)");
    if (opt.anneal.iterations == 0 && opt.anneal.time_limit == 0) {
      throw braid::UsageError("--iterations 0 with --time-limit 0 would never stop; set one of them");
    }
    return generate(opt, mpi.rank());
  });
}
