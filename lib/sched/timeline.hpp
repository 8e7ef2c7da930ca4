// A schedule whose start/end times are kept current under adjacent swaps: the
// move of RLHFuse Algorithm 2, evaluated incrementally instead of by the
// from-scratch recursion of Algorithm 3.
//
// Why it is cheap:
// * A topological order `ord` of the dependency graph (device order + data
//   edges) is kept as a permutation. Swapping neighbours a, b on a device
//   removes a→b and adds b→a; the order is repaired the Pearce–Kelly way, by
//   reordering only the descendants of a and the ancestors of b that lie
//   between them. Meeting b's data predecessor among a's descendants means the
//   swap closes a cycle (a deadlock) and it is refused.
// * New times are pushed forward from b and a through a bucket queue keyed by
//   `ord` (a bitset scanned upwards: no heap), and only along paths whose end
//   times actually change.
// * Each subtask also keeps q, the longest path from its start to the end of
//   the schedule (durations and p2p lags). q depends on the graph below a
//   subtask only, so a swap changes it only for b, a and their ancestors. The
//   caller passes the largest makespan it would accept (the annealer draws its
//   random number first); new start + q of b, of a, and of every subtask whose
//   time moves is then an exact lower bound of the new makespan, and the swap
//   is rolled back the moment one exceeds the threshold. Most rejected moves
//   cost O(1); q is brought up to date (backwards, same bucket queue) only for
//   moves that are kept.
// * Each subtask's device neighbours (kept current by every swap), its data
//   neighbours, its duration and its input's lag sit in one record, so that
//   timing a subtask reads that record and the two ends it waits for; the
//   passes are bound by those dependent loads
//   (docs/notes/schedgen-timeline-speed.md).
// * Activation memory on a device depends only on its order (one subtask at a
//   time), so the memory cap is an O(1) check at the swap point.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

enum class SwapResult { done, invalid, too_slow };

class Timeline {
 public:
  // `order` must be valid (evaluate() says so) and within the memory cap.
  Timeline(const Problem& p, const Order& order);

  // Swaps the subtasks at positions i and i+1 of device d. `invalid`: the
  // result would break a dependency, deadlock, exceed the memory cap or reorder
  // two micro-batches of one stage; `too_slow`: its makespan would exceed
  // `threshold`. In both cases nothing changes. `done`: swapped; undo() reverts.
  SwapResult swap(int d, int i, double threshold = std::numeric_limits<double>::infinity());
  // Several swaps made as one move (a chain move: one per device along a pipeline),
  // in the given order, and timed once at the end: only the state after the last
  // one is held to `threshold`. The order is repaired swap by swap (a swap that
  // would close a cycle at its turn makes the move `invalid`); then one forward
  // pass retimes from every swapped place, refusing the move early only above the
  // highest of them (below it q is stale), and q is brought up to date, for all of
  // them at once, only when the move is kept. Nothing changes unless `done`; undo()
  // reverts all of them.
  SwapResult swap_all(const std::vector<std::pair<int, int>>& swaps,
                      double threshold = std::numeric_limits<double>::infinity());
  // Reverts the last swap() or swap_all() that returned `done` (only that one),
  // bit for bit.
  void undo();

  double makespan() const;
  // Tie-breaks under equal makespans, kept up to date by every swap at no extra
  // pass (from the subtasks whose times it already recomputes): the sum of every
  // subtask's end ("flow") and the sum of every device's finishing time.
  double end_sum() const { return end_sum_; }
  double finish_sum() const { return finish_sum_; }
  // Subtasks on a longest path (start + q = makespan): a schedule of equal
  // makespan with fewer of them is closer to a shorter one. Kept from the
  // subtasks a swap retimes; a recount only when the makespan itself moves.
  int critical_count() const { return critical_count_; }
  // Off: kept moves no longer refresh the critical flags and count (they go stale),
  // for a walk that never reads them (the memory pass).
  void track_critical(bool on) { track_critical_ = on; }
  bool critical(std::int32_t t) const { return critical_[static_cast<std::size_t>(t)] != 0; }
  const Order& order() const { return order_; }
  // Position of subtask t on its device.
  int position(std::int32_t t) const { return pos_[static_cast<std::size_t>(t)]; }
  const std::vector<double>& start() const { return start_; }
  const std::vector<double>& end() const { return end_; }
  // Peak activation memory of device d (a scan of its levels).
  double device_peak(int d) const;
  // Device d's memory after the subtask at position i.
  double device_level(int d, int i) const { return level_[static_cast<std::size_t>(d * per_device_ + i)]; }
  // Device d's memory after position i were positions i and i+1 swapped: the one
  // level a swap changes, known before the swap is timed.
  double level_if_swapped(int d, int i) const {
    const std::int32_t b = order_[static_cast<std::size_t>(d * per_device_ + i + 1)];
    return (i > 0 ? device_level(d, i - 1) : 0.0) + p_.mem_delta[static_cast<std::size_t>(b)];
  }
  // How far device d's memory stands above `level`, summed over its subtasks.
  double device_excess(int d, double level) const;
  // Subtasks recomputed by the last swap (for the benchmark's figures).
  std::size_t last_touched() const { return log_.size(); }

 private:
  struct Saved {
    std::int32_t task;
    double start, end;
  };
  struct SavedQ {
    std::int32_t task;
    double q;
  };
  struct SavedOrd {
    std::int32_t task, ord;
  };
  // Index of device d's position i in the order (and in level_).
  std::size_t slot(int d, int i) const {
    return static_cast<std::size_t>(d) * static_cast<std::size_t>(per_device_) + static_cast<std::size_t>(i);
  }
  // When device d's last subtask ends.
  double finish(int d) const { return end_[static_cast<std::size_t>(order_[slot(d, per_device_ - 1)])]; }
  // When t can start once its device is free at `device_free` (and its input is in).
  double start_after(std::int32_t t, double device_free) const;
  // t's longest path to the end when what follows it on its device needs `device_rest`.
  double q_before(std::int32_t t, double device_rest) const;
  double compute_start(std::int32_t t) const;
  double compute_q(std::int32_t t) const;
  // The checks of a swap of a (before) and b that need no graph walk: b does not wait
  // for a, they are not two micro-batches of one stage, and the one level it changes
  // (to `new_level`) fits the memory cap.
  bool swappable(std::int32_t a, std::int32_t b, double new_level) const;
  void update_q(std::int32_t a, std::int32_t b, double qa, double qb);
  void set_q(std::int32_t t, double v);
  void propagate_q(std::size_t top);
  void mark_dirty(std::int32_t t);
  void mark_preds(std::int32_t t);
  void set_ord(std::int32_t t, std::int32_t o);
  void apply_swap(int d, int i);
  void restore();
  // The Pearce–Kelly steps of a swap of a (before) and b on a device: false when b's
  // data predecessor is among a's descendants placed before b (a cycle).
  bool collect_descendants(std::int32_t a, std::int32_t b);
  // ... then b's ancestors placed after a, and both sets given each other's slots.
  void reorder(std::int32_t a, std::int32_t b);
  // The swap in the order and its one level, logged for restore().
  void commit_swap(int d, int i, double new_level);
  // Forward retiming from the marked subtasks (the scan from topological place
  // `from_ord`); false when a start + q exceeds the threshold (the caller restores).
  // q is trusted except for `skip_a`, `skip_b` and the places below `trusted_from`
  // (a multiple of 64: the scan's words).
  bool push_forward(std::size_t from_ord, double threshold, std::int32_t skip_a, std::int32_t skip_b,
                    std::size_t trusted_from);
  void begin_move();

  const Problem& p_;
  int per_device_;
  double cap_;
  Order order_;
  std::vector<std::int32_t> pos_;
  // Per subtask, what the timing passes read together: its device neighbours (kept
  // current by every swap; -1 at the device's ends), its data neighbours, its
  // duration and its input's lag.
  struct Link {
    std::int32_t prev, next, pred, succ;
    double dur, lag;
  };
  std::vector<Link> link_;
  std::vector<std::int32_t> ord_, at_ord_;  // topological order and its inverse
  std::vector<double> start_, end_;
  std::vector<double> level_;      // memory on the device after the subtask at that position
  std::vector<double> q_;          // longest path from a subtask's start to the end
  // Per-swap scratch, reused so a swap allocates nothing.
  std::vector<std::uint32_t> mark_;
  std::uint32_t epoch_ = 0;
  std::vector<std::uint64_t> dirty_;
  // The lowest and highest word of dirty_ with a bit set (or lo > hi: none), so
  // that the scans stop where the marks end.
  std::size_t dirty_lo_ = std::numeric_limits<std::size_t>::max(), dirty_hi_ = 0;
  void clear_dirty_range() {
    dirty_lo_ = std::numeric_limits<std::size_t>::max();
    dirty_hi_ = 0;
  }
  std::vector<std::int32_t> stack_, forward_, backward_, slots_;
  std::vector<Saved> log_;
  std::vector<SavedOrd> ord_log_;
  std::vector<SavedQ> q_log_;
  struct SavedSwap {
    int d, i;
    double level;  // device d's level after position i before the swap
  };
  std::vector<SavedSwap> swap_log_;
  std::vector<std::uint8_t> moved_device_;  // devices a swap_all() swaps on
  std::vector<std::pair<int, double>> finish_before_;  // their finishing times before it
  void refresh_critical();
  bool is_critical(std::size_t t, double makespan) const;
  double end_sum_ = 0, finish_sum_ = 0;
  std::vector<std::uint8_t> critical_;
  int critical_count_ = 0, saved_critical_count_ = 0;
  double critical_makespan_ = 0, saved_critical_makespan_ = 0;
  std::vector<std::int32_t> critical_log_;  // subtasks whose flag the last swap flipped
  bool track_critical_ = true;
  double saved_end_sum_ = 0, saved_finish_sum_ = 0;
};

// A chain move: one micro-batch's subtasks of one kind (its forwards, or its
// backwards) on every stage of its pipeline, each moved one place on its device
// (later or earlier), so the whole chain shifts against the other work at once.
// Adjacent swaps make this one device at a time, and each of those steps alone
// may lengthen the makespan that the whole shift keeps
// (docs/notes/schedgen-latency-search.md, "Chain moves"). The annealer plans a move first (which swaps, hence which memory
// levels change: known before any timing), then applies it on a Timeline.
class ChainMove {
 public:
  explicit ChainMove(const Problem& p) : p_(p) {}
  // Plans the move of subtask t's chain, later (dir > 0) or earlier (dir < 0): a
  // member passes its neighbour unless that is the device's end or a subtask of
  // the same model and kind (two micro-batches never pass), where it stays.
  // False: fewer than two members would move (that is an ordinary swap).
  bool plan(const Timeline& tl, std::int32_t t, int dir);
  // The planned swaps: device and position (it and the next one swap).
  const std::vector<std::pair<int, int>>& planned() const { return moves_; }
  // Makes the planned swaps as one move (Timeline::swap_all): only the shifted
  // chain is held to `threshold`, not each step on the way. `done`: Timeline::undo()
  // reverts it.
  SwapResult apply(Timeline& tl, double threshold = std::numeric_limits<double>::infinity()) const {
    return tl.swap_all(moves_, threshold);
  }

 private:
  const Problem& p_;
  std::vector<std::pair<int, int>> moves_;
};

}  // namespace braid::sched
