// Simulated annealing over fused pipeline schedules (RLHFuse Algorithms 1–2),
// then the memory pass that lowers peak activation memory without raising the
// makespan (§5.2 "Optimizing memory usage").
#pragma once

#include <cstdint>
#include <functional>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

struct AnnealOptions {
  std::uint64_t seed = 1;
  std::uint64_t stream = 0;        // one per MPI rank
  std::uint64_t iterations = 0;    // accepted-or-rejected neighbours; 0 = no cap
  double time_limit = 10.0;        // seconds for the latency search; 0 = none
  double t0 = 0;                   // initial temperature; <= 0: a tenth of the mean subtask duration
  double alpha = 0.99999;          // geometric cooling per iteration
  double epsilon = 0;              // reheat (new round) below this; <= 0: t0 * 1e-4
  double mem_weight = 0;           // latency energy = makespan + mem_weight x (mean subtask / mean act_mem) x peak
  std::uint64_t mem_iterations = 20'000'000;  // memory pass neighbours (its cooling spans them or its time)
  double mem_time_limit = 0;       // seconds; 0 = half of time_limit
  double mem_target = 0;           // the memory pass stops once the peak is this low (serial 1F1B's)
  // Parallel search: polled now and then by the latency search, which gives up (and
  // skips its memory pass: its schedule cannot win) once it answers true; and called
  // once when this search reaches the bound, before its memory pass.
  std::function<bool()> peer_reached_bound;
  std::function<void()> on_reached_bound;
};

struct AnnealStats {
  std::uint64_t iterations = 0;     // valid neighbours evaluated (latency search)
  std::uint64_t invalid = 0;        // proposals refused by the validity checks
  std::uint64_t accepted = 0;
  std::uint64_t rounds = 0;
  double seconds = 0;
  double seconds_to_best = 0;
  bool reached_bound = false;
  bool stopped_by_peer = false;     // another rank reached the bound first
  std::uint64_t mem_iterations = 0;
  double mem_seconds = 0;
};

struct AnnealResult {
  Order order;
  double makespan = 0;
  double peak_memory = 0;
  AnnealStats stats;
};

// Called now and then from the search loop (for progress): iterations so far,
// current and best makespan.
using AnnealReport = std::function<void(std::uint64_t, double, double)>;

// Latency search from `start` (valid, within the cap), stopping at `bound`, then
// the memory pass. Deterministic for given options when no time limit binds.
AnnealResult anneal(const Problem& p, const Order& start, double bound, const AnnealOptions& opt,
                    const AnnealReport& report = {});

// The memory pass alone: from `start`, lower the peak activation memory while
// the makespan stays at most that of `start`; stops at `target` peak.
Order lower_memory(const Problem& p, const Order& start, std::uint64_t iterations, double time_limit,
                   double target, std::uint64_t seed, std::uint64_t stream, AnnealStats* stats = nullptr);

}  // namespace braid::sched
