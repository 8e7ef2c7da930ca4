// One device's order, made again exactly: the lowest peak of activation memory
// that device can have while every other device keeps its times.
//
// A device runs, for each model it holds a stage of, that stage's forwards in
// micro-batch order and its backwards in micro-batch order (two micro-batches
// never pass each other on a stage), so its order is a merge of 2 × models
// chains. With the other devices' times held, every subtask has a window: it
// cannot start before its input arrives (its data predecessor's end on another
// device), and must end early enough for its data successor on another device to
// start by its latest start (for the schedule's makespan). A merge is then a path
// through the grid of chain counts, its memory level a function of the counts,
// and "the earliest time the device can have run these" is a dominance: a dynamic
// program over the grid finds, for a memory limit X, whether some merge meets
// every window with every level at most X, and a search over the few levels
// there are gives the lowest such X. The annealer's memory pass moves one
// adjacent pair at a time and refuses every step that lengthens the makespan, so
// it may hold a device above what this finds
// (docs/notes/schedgen-exact-search.md).
//
// The windows come from the other devices' present times; a device whose new
// order changes them through a cycle (its output comes back to it through
// others) may end later than the program assumed, so each new order is timed
// exactly and kept only if the makespan does not grow.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

// No bound (the searches' levels and limits start here).
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// One device's subtasks as chains: chain 2m holds model m's forwards on it, 2m+1 its
// backwards, each in micro-batch order. A point of the device's grid is a count per
// chain, at index sum(count x stride); its memory level is the sum over models of
// act x (forwards - backwards run).
struct DeviceChains {
  struct Chain {
    std::vector<std::int32_t> tasks;
    double act = 0;  // memory a forward takes (its backward gives it back)
  };
  std::vector<Chain> chains;
  std::vector<std::size_t> stride;
  std::size_t points = 1;  // saturates at SIZE_MAX
};
DeviceChains device_chains(const Problem& p, int d);

// The memory levels a device can stand at (one per mix of in-flight counts), at
// most `limit`, ascending.
std::vector<double> device_levels(const DeviceChains& g, double limit);

// Latest end of every subtask for which `order` still meets `makespan`
// (t: evaluate(p, order)).
std::vector<double> latest_finish(const Problem& p, const Order& order, const Timing& t, double makespan);

// Device d's order with the lowest peak among the merges of its chains that meet
// the windows (subtasks end at `end`, as the other devices' are timed; lf: their
// latest ends; every end at most `makespan`), at most `cap`, and among those the
// one that ends earliest; its peak is the level it holds at most. Pick::highest
// asks only the highest level at most `cap` (the order nearest to the present one
// below a peak). Nothing when the device's grid has more than `max_states` points,
// or when no merge fits (at its present peak: a cycle through other devices, which
// the windows cut, held the present order up).
struct DeviceSequence {
  double peak = 0;
  std::vector<std::int32_t> order;
};
enum class Pick { lowest, highest };
// `stop`, asked before each pass of the program over the grid, ends it with nothing.
std::optional<DeviceSequence> lowest_peak_sequence(const Problem& p, const std::vector<double>& end,
                                                   const std::vector<double>& lf, int d, double makespan, double cap,
                                                   std::size_t max_states, const std::function<bool()>& stop = {},
                                                   Pick pick = Pick::lowest);

// A device whose grid has more points than this is left as it is, by default: the
// program's time and memory grow with it (a sweep over Table 3's 16/16 GBS 32, 1.2e6
// points a device, takes about half a second; over 16/8 GBS 64, 4.6e6, 2–4 s).
// A device at the highest peak may have up to kResequencePeakStates (16/16 GBS 64:
// 1.8e7 points, 160 MB, about 0.7 s a device).
inline constexpr std::size_t kResequenceStates = std::size_t{1} << 23;
inline constexpr std::size_t kResequencePeakStates = std::size_t{1} << 25;

// Points of a device's grid (the same on every device: each holds one stage of
// every model): the product over its chains of their lengths + 1.
std::size_t grid_points(const Problem& p);

// Seconds a clocked memory phase keeps back for the sweep of its last pass (the
// sweep stops at the deadline, and a pass that runs to the end would otherwise go
// out unswept): about the program over the devices at the highest peak, 1e-7 s a
// point, at most a tenth of the phase (search.cpp).
double resequence_reserve(const Problem& p, double seconds);

struct ResequenceOptions {
  int rounds = 3;  // sweeps over the devices, while one of them still comes down
  std::size_t max_states = kResequenceStates;
  std::size_t peak_states = kResequencePeakStates;  // for the devices at the highest peak
  std::function<bool()> stop;  // asked often: true ends the sweep there (the order stays valid)
};

struct ResequenceStats {
  int tried = 0;    // devices whose program ran
  int kept = 0;     // new orders kept (a lower peak, or the same peak run earlier)
  int lowered = 0;  // ... of them with a lower peak
  int refused = 0;  // new orders whose exact timing lengthened the makespan
  int skipped = 0;  // grids too large, or nothing offered
};

// Each device in turn is given its lowest_peak_sequence, timed exactly with the
// others and kept when the makespan does not grow; the sweep is repeated while a
// device comes down. The makespan of `order` never grows and no device's peak rises.
ResequenceStats resequence_devices(const Problem& p, Order& order, const ResequenceOptions& opt = {});

}  // namespace braid::sched
