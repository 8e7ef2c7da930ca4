// Orders searched depth first with every subtask's window propagated: a schedule
// at a given makespan whose every device stays at or below a given memory level,
// found (or, with no node budget, shown not to exist) the way a constraint solver
// would.
//
// Every subtask has a window, [earliest start, latest end]: at first from the
// chains of data dependencies and of micro-batches on a stage, and from the
// makespan. One device's windows are tightened exactly by the dynamic program of
// sched/resequence.hpp, run forwards and backwards over its grid of chain counts
// with its memory level held at most the level: a subtask can start no earlier,
// and end no later, than some merge that meets every window lets it. The tightened
// windows go along the data edges to the other devices, whose windows are
// tightened in turn, until nothing moves; a window that closes, or a device whose
// grid cannot be crossed, means no schedule under the decisions taken. Windows only
// close along a descent, so a point of a device's grid from which the rest cannot fit
// stays so below the node whose program found it: later programs skip it, until the
// search goes back above that node (a trail of such points, as constraint solvers keep).
//
// The decisions are the devices' orders, built from the front: the device whose
// next subtask can start earliest gets it, the candidates tried in the order of
// the room they leave that device (the latest the subtask may end for the rest of
// the device to fit, less its earliest end; a backward before a forward at equal
// room: lower memory). The search backtracks when the windows close, and
// restarts, with the candidates' rooms perturbed, after a few hundred nodes that went
// no deeper than its deepest decision: a wrong turn near the root would otherwise
// spend the whole budget underneath it. Every order it returns is timed exactly
// (evaluate) and checked.
//
// The memory pass (annealing, one swap at a time) stops at a level where the
// schedules below are many swaps away through longer makespans; this search has no
// such walls, but its time grows with the grids and the number of subtasks, so it
// runs on the problems whose grids are small (kExactStates): Table 3's GBS 8, 16
// and 32 settings (docs/notes/schedgen-exact-search.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

// The largest device grid (grid_points) the search runs on by default, and the most
// subtasks: a descent holds one node (two windows a subtask) per decision, so its
// memory grows with the square of the subtasks (4,096: about 270 MB).
inline constexpr std::size_t kExactStates = std::size_t{1} << 19;
inline constexpr int kExactTasks = 4096;
inline constexpr std::uint64_t kExactNodes = 20000;
inline constexpr std::uint64_t kExactRestartNodes = 600;
// lower_peak_exactly: a descent gives a level up after this many nodes that went no
// deeper (the descents that find a level go back 8-60 times on Table 3's GBS 32
// settings), and sweeps at most this many times when it has neither budget nor clock.
inline constexpr std::uint64_t kExactProbeSlack = 100;
inline constexpr std::uint64_t kExactSweeps = 8;
// The share of a clocked memory phase kept for it (search.cpp).
inline constexpr double kExactShare = 0.5;

struct ExactOptions {
  std::uint64_t nodes = kExactNodes;  // over the whole call (a node: one propagation)
  // A descent restarts once this many of its nodes went no deeper than its deepest
  // decision (0: never; a node goes one decision deeper or goes back).
  std::uint64_t restart_nodes = kExactRestartNodes;
  std::uint64_t descents = 0;        // at most this many descents (0: no limit)
  std::uint64_t first_descent = 0;   // the first descent's perturbation (0: none)
  std::uint64_t seed = 1;             // the perturbations of descents after the unperturbed one
  std::function<bool()> stop;         // asked every few nodes: true ends the search with nothing
  // Candidates tried in the order this schedule runs them on their device, instead of
  // by their room (null: by their room).
  const Order* guide = nullptr;
};

struct ExactStats {
  std::uint64_t nodes = 0;
  int levels_tried = 0;  // lower_peak_exactly: levels searched
  int levels_found = 0;  // ... and found
};

// Whether the search runs on p: every device grid at most `max_states` points, at
// most kExactTasks subtasks, and a point's chain counts fit its program's word (at
// most 8 chains a device, 255 subtasks a chain).
bool exact_applies(const Problem& p, std::size_t max_states = kExactStates);

// An order with makespan at most `makespan` and every device's peak at most `level`,
// or nothing when none was found within the budget (with opt.nodes = 0 and
// restart_nodes = 0, nothing means there is none). Throws std::invalid_argument
// where a program cannot hold a point's counts (exact_applies with no grid limit).
std::optional<Order> order_within(const Problem& p, double makespan, double level, const ExactOptions& opt,
                                  ExactStats* stats = nullptr);

// The levels a device of p can stand at (sums of in-flight activations), ascending.
std::vector<double> memory_levels(const Problem& p);

// `order`'s peak taken down at `order`'s makespan: the levels below the present peak,
// down to `floor`, probed by single descents (each gives up after kExactProbeSlack
// nodes that go no deeper) in sweeps: the floor, then down from the peak, a level at
// a time and galloping while they are found, and after each find one descent led by
// the found order at the level just below; the first sweep perturbed as
// opt.first_descent says (0: not at all), each later one perturbed anew, until the
// budget, opt.stop or the levels end (opt.restart_nodes above kExactProbeSlack is held
// to it). The order is replaced only by one with the same makespan or shorter and a
// lower peak.
ExactStats lower_peak_exactly(const Problem& p, Order& order, double floor, const ExactOptions& opt);

}  // namespace braid::sched
