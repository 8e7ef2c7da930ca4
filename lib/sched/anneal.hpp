// Simulated annealing over fused pipeline schedules (RLHFuse Algorithms 1–2),
// then the memory pass that lowers peak activation memory without raising the
// makespan (§5.2 "Optimizing memory usage").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sched/exact.hpp"
#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

// What orders schedules of equal makespan in the latency search (lexicographically
// after the makespan): nothing (a flat plateau, the paper's energy), the sum of the
// devices' finishing times, the sum of every subtask's end ("flow"), or the number
// of subtasks on a longest path ("critical").
// "memory": the peak activation memory (highest device peak + a quarter of the mean),
// one mean activation weighing one mean subtask duration.
enum class TieBreak { none, finish, flow, critical, memory };
TieBreak parse_tie_break(const std::string& name);  // throws std::invalid_argument
const char* tie_break_name(TieBreak t);

// What a latency search tells its peers at a sync point, and what it hears back.
struct SyncState {
  double best_makespan = 0, best_tie = 0;   // its best schedule so far
  bool reached_bound = false;
  bool wants_stop = false;                  // time or iteration budget spent, or no valid move left
};
struct SyncReply {
  bool stop = false;            // every search stops after this sync point
  bool peer_reached_bound = false;
  // A better schedule (of another search), its makespan and tie-break: it becomes this
  // search's best, which the walk restarts from at its next reheat; else null.
  const Order* adopt = nullptr;
  double adopt_makespan = 0, adopt_tie = 0;
};

// The share of chain moves among the memory pass's proposals, by default
// (docs/notes/schedgen-memory-pass.md, "Chain moves in the memory pass").
inline constexpr double kMemChainMoves = 0.1;
// The memory pass's energy counts the memory that stands above a level this many mean
// activations below the lowest highest peak the pass has met (never below its target),
// by default (docs/notes/schedgen-memory-pass.md, "The energy").
inline constexpr double kMemLevelMargin = 2.0;
// The share of the latency search's swaps drawn on a longest path, by default
// (docs/notes/schedgen-latency-search.md, "Critical moves").
inline constexpr double kCriticalMoves = 0.75;
// After a memory pass that ends with time left, every other pass is a polish: this
// many neighbours from the last pass's result, starting kMemPolishCold times as
// hot as a pass from a candidate (docs/notes/schedgen-exact-search.md).
inline constexpr std::uint64_t kMemPolish = 5'000'000;
inline constexpr double kMemPolishCold = 0.2;

// Bounds of braid-schedgen's options (sched/option_schema.cpp), which a schedule records in
// its "search" and its reader checks again: seconds (a time limit, a search's time) at most
// kMaxSeconds, temperatures (t0, epsilon, in the spec's time units) at most kMaxTemperature,
// factors and weights at most kMaxFactor, counts at most kMaxSearchCount (below 2^63: JSON
// integers as int64).
inline constexpr double kMaxSeconds = 1e9;
inline constexpr double kMaxTemperature = 1e12;
inline constexpr double kMaxFactor = 1e12;
inline constexpr double kMaxSearchCount = 9.2e18;

struct AnnealOptions {
  std::uint64_t seed = 1;
  std::uint64_t stream = 0;        // one per MPI rank
  std::uint64_t iterations = 0;    // accepted-or-rejected neighbours; 0 = no cap
  double time_limit = 10.0;        // seconds for the latency search; 0 = none
  double t0 = 0;                   // initial temperature; <= 0: t0_factor x the mean subtask duration
  double t0_factor = 1.0;
  std::vector<double> t0_cycle = {1.0, 0.3, 0.1};  // round k starts at t0 x t0_cycle[(k + stream) mod size]
  double alpha = 0.999995;         // geometric cooling per iteration
  double epsilon = 0;              // reheat (new round) below this; <= 0: t0 * 1e-4
  double mem_weight = 0;           // latency energy = makespan + mem_weight x (mean subtask / mean act_mem) x peak
  // Memory pass neighbours (its cooling spans them or its time). 0: 20M without a time
  // limit; with one, no cap (the pass runs for its time, mem_time_limit).
  std::uint64_t mem_iterations = 0;
  double mem_time_limit = 0;       // seconds; 0 = half of time_limit
  bool memory_pass = true;         // anneal(): false returns the latency search's best as it is
  double mem_t0_factor = 0.5;      // the memory pass's initial temperature, in mean act_mem
  double mem_target = 0;           // the memory pass stops once the peak is this low (serial 1F1B's)
  // The memory pass counts memory above (its lowest peak - this x mean act_mem), and
  // never below mem_target; a large margin counts all memory above mem_target.
  double mem_level_margin = kMemLevelMargin;
  // parallel_lower_memory: neighbours of a polish pass (kMemPolish; 0: every pass
  // starts from a candidate), and whether each pass's result has its devices made
  // again exactly (sched/resequence.hpp).
  std::uint64_t mem_polish = kMemPolish;
  bool mem_resequence = true;
  // ... and then the result's peak taken down by orders searched exactly
  // (sched/exact.hpp) for at most this many nodes (under a clock: for kExactShare of
  // the memory phase), on problems whose device grids have at most kExactStates
  // points (0: never).
  std::uint64_t mem_exact_nodes = kExactNodes;
  TieBreak tie_break = TieBreak::critical;
  double tie_weight = 1.0;  // the tie-break's scale against the temperature
  // At every reheat, go back to the best schedule found (else: anneal on from where
  // the walk stands).
  bool restart_from_best = true;
  // Share of the latency search's proposals that shift one micro-batch's whole chain
  // of forwards (or backwards) one place on every device (ChainMove,
  // sched/timeline.hpp) instead of swapping two neighbours on one; and of the memory
  // pass's (docs/notes/schedgen-latency-search.md and -memory-pass.md measure both).
  double chain_moves = 0.05;
  double mem_chain_moves = kMemChainMoves;
  // Share of the latency search's swaps drawn at a subtask on a longest path (with
  // its device neighbour before or after it) instead of anywhere: only such swaps can
  // shorten the makespan (docs/notes/schedgen-latency-search.md, "Critical moves").
  double critical_moves = kCriticalMoves;
  // Parallel search: called every sync_every valid neighbours, and at once when this
  // search wants to stop (bound reached, budget spent). Every search of a group makes
  // the same sequence of calls (a collective), so with an iteration budget the result
  // does not depend on timing. A search stopped by a peer at the bound skips its
  // memory pass (its schedule cannot win).
  std::function<SyncReply(const SyncState&, const Order& best)> sync;
  std::uint64_t sync_every = 1 << 17;
  // With a time limit and no iteration budget, meet every sync_seconds of wall time
  // instead (0: by neighbours always).
  double sync_seconds = 0.2;
  bool share_best = true;  // parallel_search: ranks behind the best schedule of all restart from it
  // Meetings by the clock only: asked at every clock check, true once a peer wants a
  // meeting now (it stops), and this search then joins it at once instead of at its
  // next sync_seconds (parallel_search).
  std::function<bool()> meeting_called;
};

// Whether the ranks of a search with these options meet by the clock (every
// sync_seconds) rather than by neighbours: under a time limit alone, where the result
// depends on timing anyway.
bool meets_by_clock(const AnnealOptions& opt);

struct AnnealStats {
  std::uint64_t iterations = 0;     // valid neighbours evaluated (latency search)
  std::uint64_t invalid = 0;        // proposals refused by the validity checks
  std::uint64_t accepted = 0;
  std::uint64_t rounds = 0;
  double seconds = 0;
  double seconds_to_best = 0;
  bool reached_bound = false;
  bool stopped_by_peer = false;     // another rank reached the bound first
  std::uint64_t plateau = 0;        // kept-or-undone moves that left the makespan unchanged
  std::uint64_t tie_refused = 0;    // of those, refused by the tie-break
  std::uint64_t restarts = 0;       // reheats that went back to the best schedule
  std::uint64_t adopted = 0;        // best schedules taken from peers
  std::uint64_t mem_iterations = 0;
  double mem_seconds = 0;
  bool mem_stalled = false;         // the memory pass ended because its best stopped moving
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

// The neighbours a memory pass of `opt` may take: mem_iterations, or its default.
std::uint64_t memory_pass_iterations(const AnnealOptions& opt, double time_limit);

// The memory pass alone: from `start`, lower the peak activation memory while
// the makespan stays at most that of `start`; stops at `target` peak, or when `stop`
// (asked with the clock, every few thousand neighbours) says so. `level_margin`: see
// AnnealOptions::mem_level_margin.
Order lower_memory(const Problem& p, const Order& start, std::uint64_t iterations, double time_limit,
                   double target, std::uint64_t seed, std::uint64_t stream, AnnealStats* stats = nullptr,
                   double t0_factor = 0.5, double chain_moves = kMemChainMoves,
                   double level_margin = kMemLevelMargin, const std::function<bool()>& stop = {});

}  // namespace braid::sched
