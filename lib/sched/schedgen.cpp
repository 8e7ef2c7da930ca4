#include "sched/schedgen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/dryrun.hpp"
#include "sched/lower.hpp"
#include "sched/option_schema.hpp"
#include "sched/schedule_json.hpp"
#include "sched/search.hpp"
#include "sched/svg.hpp"

namespace braid::sched {

int verify_schedule_file(const SchedgenOptions& opt, int rank) {
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

namespace {
// --start both searches from 1F1B too only when the search from greedy fusion
// took at most this share of the latency budget (time or iterations) to the bound.
constexpr double kBothFirstShare = 0.10;
// ... and the search from 1F1B then gets at most this share of it: in the 30 s
// tables the second searches whose schedule won took at most 0.3 of it, and those
// that ran longer never won, while their time was the memory pass's (real and int
// 16/8 GBS 64: 9-19 s of 20; docs/notes/schedgen-latency-search.md, "The two starts").
constexpr double kBothSecondShare = 0.35;
}  // namespace

int run_schedgen(SchedgenOptions opt, comm::Communicator& world) {
  const int rank = world.rank();
  SchedSpec spec = load_schedspec(opt.spec);
  settle_knobs(opt, spec.anneal);
  const Problem p = build_problem(std::move(spec));
  const LowerBound lb = lower_bound(p);
  const BaselineResult serial = serial_1f1b(p.spec);

  // Start from greedy fusion; under a tight memory cap it may get stuck, then
  // from the models' 1F1B one after the other.
  Order start;
  Timing greedy_timing;
  bool greedy_ok = false;
  if (auto g = greedy(p)) {
    start = *g;
    greedy_ok = true;
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
  // The latency searches first (no memory pass in them), then one memory phase over
  // their results at the best makespan: the memory pass gets the time the latency
  // searches leave of the whole budget (time limit + memory time, 1.5 x the limit by
  // default), on every rank, and the lowest peak of all wins (docs/tools/schedgen.md).
  const auto began = std::chrono::steady_clock::now();
  const double mem_extra = opt.anneal.mem_time_limit > 0 ? opt.anneal.mem_time_limit : opt.anneal.time_limit / 2;
  const double budget = opt.anneal.time_limit > 0 ? opt.anneal.time_limit + mem_extra : 0.0;
  AnnealOptions latency = opt.anneal;
  latency.memory_pass = false;
  const bool from_greedy = opt.start != "1f1b" && greedy_ok;
  if (opt.start == "1f1b") start = one_f_one_b(p);
  SearchResult found = parallel_search(world, p, start, lb.value, latency, report);
  std::vector<SearchResult> searches;
  std::vector<std::string> starts;
  // The first search stops at the bound: its time and iterations are the time to it.
  const double seconds_to_bound = found.any_reached_bound ? found.seconds : -1;
  const std::uint64_t iterations_to_bound = found.total_iterations;
  std::uint64_t total_iterations = found.total_iterations;
  double latency_seconds = found.seconds;
  searches.push_back(std::move(found));
  starts.emplace_back(from_greedy ? "greedy" : "1f1b");
  // "both": when the search from greedy fusion reached the bound quickly (within
  // kBothFirstShare of the latency budget), the budget left (at most
  // kBothSecondShare of it) goes to a search from 1F1B, which tends to reach the
  // bound holding fewer activations, and both schedules go to the memory phase.
  // When the first search was slow, the second would eat the memory pass's time on
  // the settings that need it most: greedy alone then
  // (docs/notes/schedgen-latency-search.md, "The two starts").
  if (opt.start == "both" && from_greedy && searches.front().any_reached_bound) {
    AnnealOptions second = latency;
    bool run_second = true;
    if (second.time_limit > 0) {
      second.time_limit = std::min(second.time_limit - latency_seconds, kBothSecondShare * opt.anneal.time_limit);
      run_second = latency_seconds <= kBothFirstShare * opt.anneal.time_limit;
    }
    if (second.iterations > 0) {  // per rank, like the time
      const std::uint64_t used = iterations_to_bound / static_cast<std::uint64_t>(world.size());
      second.iterations = std::min(second.iterations > used ? second.iterations - used : 0,
                                   static_cast<std::uint64_t>(kBothSecondShare * static_cast<double>(opt.anneal.iterations)));
      run_second = run_second && static_cast<double>(used) <= kBothFirstShare * static_cast<double>(opt.anneal.iterations);
    }
    if (run_second) {
      searches.push_back(parallel_search(world, p, one_f_one_b(p), lb.value, second, report));
      starts.emplace_back("1f1b");
      total_iterations += searches.back().total_iterations;
      latency_seconds += searches.back().seconds;
    }
  }
  std::vector<const SearchResult*> candidates;
  for (const SearchResult& s : searches) candidates.push_back(&s);
  double mem_seconds = 0;
  if (budget > 0) {
    mem_seconds = std::max(budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(),
                           0.05 * mem_extra);
  }
  progress.set_status("memory pass");
  const MemoryPhaseResult memory = parallel_lower_memory(world, p, candidates, lb.value, opt.anneal, mem_seconds);
  const SearchResult& won = searches[static_cast<std::size_t>(memory.candidate)];
  const std::string start_used = starts[static_cast<std::size_t>(memory.candidate)];
  progress.finish();
  if (rank != 0) return 0;

  const Order& best_order = memory.order;
  const Timing timing = evaluate(p, best_order);
  if (!timing.valid) throw std::runtime_error("the search returned an invalid schedule: " + timing.problem);
  const Lowered lowered = lower(p, best_order, timing);
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
  summary.search = {{"ranks", won.ranks},
                    {"winner_rank", memory.winner},
                    {"ranks_at_bound", won.ranks_at_bound},
                    {"ranks_stopped_by_peer", won.ranks_stopped},
                    {"schedules_adopted", won.adopted},
                    {"seconds_to_best", won.best.stats.seconds_to_best},
                    {"rounds", won.best.stats.rounds},
                    {"plateau_moves", won.best.stats.plateau},
                    {"tie_refused", won.best.stats.tie_refused},
                    {"latency_makespan", won.best.makespan},
                    {"latency_peak_memory", won.best.peak_memory},
                    {"mem_candidates", searches.size()},
                    {"mem_iterations", memory.iterations},
                    {"mem_seconds", memory.seconds},
                    {"mem_passes", memory.passes},
                    {"mem_devices_lowered", memory.devices_lowered},
                    {"mem_exact_nodes", memory.exact_nodes},
                    {"mem_exact_levels", memory.exact_levels},
                    {"iterations", total_iterations},
                    {"seconds", latency_seconds},
                    {"seed", opt.anneal.seed},
                    {"start", opt.start},
                    {"preset", opt.preset},
                    {"start_used", start_used},
                    {"seconds_to_bound", seconds_to_bound >= 0 ? json(seconds_to_bound) : json(nullptr)},
                    {"iterations_to_bound", seconds_to_bound >= 0 ? json(iterations_to_bound) : json(nullptr)},
                    {"time_limit", opt.anneal.time_limit},
                    {"iterations_limit", opt.anneal.iterations},
                    {"anneal", knob_record(opt.anneal)},
                    {"dry_run_makespan", run.makespan}};
  ordered_json doc = schedule_to_json(p, best_order, timing, lowered, summary);
  if (!opt.made_from.is_null()) doc["made_from"] = opt.made_from;
  write_text_file(opt.output, doc.dump(1) + "\n");
  if (!opt.svg.empty()) write_text_file(opt.svg, schedule_svg(p, best_order, timing, serial.peak_memory));

  log::info("makespan {:.6g} ({}; bound {:.6g}), {:.3f}x serial 1F1B, {:.3f}x greedy; peak memory {:.6g} = {:.2f}x "
            "serial 1F1B; {} iterations on {} rank(s) in {:.1f} s",
            timing.makespan, same_time(timing.makespan, lb.value) ? "lower bound reached" : "above the lower bound",
            lb.value, serial.makespan / timing.makespan, greedy_timing.makespan / timing.makespan, timing.peak_memory,
            serial.peak_memory > 0 ? timing.peak_memory / serial.peak_memory : 0.0, total_iterations,
            won.ranks, latency_seconds + memory.seconds);
  return 0;
}

}  // namespace braid::sched
