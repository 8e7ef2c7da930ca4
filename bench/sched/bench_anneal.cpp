// Cost of one annealing iteration (one valid neighbour: swap, incremental
// makespan, accept or undo) and time to reach the lower bound, on the setting
// the RLHFuse public code is quoted at: 16 actor stages fused with 2 x 8 critic
// stages, 64 / 32 micro-batches (per-stage costs of the paper's 65B/33B pair).
//
//   bench_sched [iterations] [seeds]
//
// Prints wall time and this process's CPU time: on a shared machine the CPU
// time is the figure that does not depend on the neighbours' load.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <string>

#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/problem.hpp"
#include "sched/timeline.hpp"
#include "core/rng.hpp"

using namespace braid::sched;

namespace {

SchedSpec table3_spec(int micro_batches) {
  // Table 2 shapes: cost per stage ~ layers/stage x hidden^2, memory ~ layers/stage x hidden.
  SchedSpec s;
  s.devices = 16;
  ModelSpec actor{.name = "actor", .stages = 16, .replicas = 1, .micro_batches = micro_batches};
  const double a_fwd = 80.0 / 16 * 8.192 * 8.192;
  actor.fwd.assign(16, a_fwd);
  actor.bwd.assign(16, 2 * a_fwd);
  actor.act_mem.assign(16, 80.0 / 16 * 8.192);
  ModelSpec critic{.name = "critic", .stages = 8, .replicas = 2, .micro_batches = micro_batches / 2, .forward = false};
  const double c_fwd = 60.0 / 8 * 6.656 * 6.656;
  critic.fwd.assign(8, c_fwd);
  critic.bwd.assign(8, 2 * c_fwd);
  critic.act_mem.assign(8, 60.0 / 8 * 6.656);
  s.models = {actor, critic};
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
  const int seeds = argc > 2 ? std::atoi(argv[2]) : 3;
  const Problem p = build_problem(table3_spec(64));
  const Order start = *greedy(p);
  const double bound = lower_bound(p).value;
  fmt::print("setting: 16 actor stages + 2x8 critic stages, 64/32 micro-batches, {} subtasks\n", p.num_tasks);
  fmt::print("greedy makespan {:.1f}, lower bound {:.1f}\n", evaluate(p, start).makespan, bound);

  // 1. Raw iteration cost with the default cooling, no early stop (bound = 0), per
  // tie-break (critical is the default; none is the paper's flat energy).
  for (TieBreak tie : {TieBreak::critical, TieBreak::finish, TieBreak::none}) {
    AnnealOptions opt;
    opt.iterations = iterations;
    opt.time_limit = 0;
    opt.memory_pass = false;  // the latency search alone, as the wall time counts it
    opt.tie_break = tie;
    const std::clock_t c0 = std::clock();
    const AnnealResult r = anneal(p, start, 0.0, opt);
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    const auto valid = static_cast<double>(r.stats.iterations);
    fmt::print("iteration cost, tie-break {}: {:.0f} ns CPU ({:.0f} ns wall) per valid neighbour; {:.0f} ns CPU per "
               "proposal; {} valid, {} refused, {} on a plateau; {:.2f} ns CPU per subtask per iteration\n",
               tie_break_name(tie), cpu / valid * 1e9, r.stats.seconds / valid * 1e9,
               cpu / static_cast<double>(r.stats.iterations + r.stats.invalid) * 1e9, r.stats.iterations,
               r.stats.invalid, r.stats.plateau, cpu / valid * 1e9 / p.num_tasks);
  }
  // 2. Time to reach the lower bound, per seed.
  for (int seed = 1; seed <= seeds; ++seed) {
    AnnealOptions opt;
    opt.seed = static_cast<std::uint64_t>(seed);
    opt.time_limit = 60;
    opt.memory_pass = false;
    const std::clock_t c0 = std::clock();
    const AnnealResult r = anneal(p, start, bound, opt);
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    fmt::print("seed {}: makespan {:.1f} ({}) after {:.2f} s CPU ({:.2f} s wall), {} iterations\n", seed, r.makespan,
               r.stats.reached_bound ? "lower bound reached" : "bound not reached", cpu, r.stats.seconds_to_best,
               r.stats.iterations);
  }
  return 0;
}
