#include "sched/anneal.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "core/clock.hpp"
#include "core/rng.hpp"
#include "sched/timeline.hpp"

namespace braid::sched {
namespace {

using Clock = std::chrono::steady_clock;

// The clock is read once per this many proposals: reading it costs more than a swap.
constexpr std::uint64_t kCheckEvery = 4096;

// Per-device peak activation memory under swaps. A swap changes one level of
// one device, so a peak only needs a rescan when that level was its sole maximum.
class PeakTracker {
 public:
  PeakTracker(const Timeline& tl, int devices, int per_device)
      : tl_(tl), per_device_(per_device), peak_(static_cast<std::size_t>(devices)), count_(peak_.size()) {
    for (std::size_t d = 0; d < peak_.size(); ++d) rescan(d);
  }
  double max_peak() const { return *std::max_element(peak_.begin(), peak_.end()); }
  double peak(std::size_t d) const { return peak_[d]; }
  // A lower bound of the highest peak if device d's level changes old → new.
  double max_after(std::size_t d, double old_level, double new_level) const {
    double m = (old_level == peak_[d] && count_[d] == 1) ? new_level : std::max(peak_[d], new_level);
    for (std::size_t e = 0; e < peak_.size(); ++e) {
      if (e != d) m = std::max(m, peak_[e]);
    }
    return m;
  }
  // Device d's positions i and i+1 are about to swap (not timed yet): its peak
  // follows the one level that changes, rescanning the device (with the new level
  // at i) only when that level was its sole maximum. Returns the level before and after.
  std::pair<double, double> apply_swap(int d, int i) {
    const auto du = static_cast<std::size_t>(d);
    const double old_level = tl_.device_level(d, i), new_level = tl_.level_if_swapped(d, i);
    if (old_level == peak_[du]) --count_[du];
    if (new_level > peak_[du]) {
      peak_[du] = new_level;
      count_[du] = 1;
    } else if (new_level == peak_[du]) {
      ++count_[du];
    }
    if (count_[du] == 0) rescan(du, i, new_level);
    return {old_level, new_level};
  }
  // One device's peak, kept aside before a move changes it and restored when the
  // move is refused.
  struct State {
    std::size_t d;
    double peak;
    int count;
  };
  State state(std::size_t d) const { return {d, peak_[d], count_[d]}; }
  // Device s.d as it was before a move (the timeline gives its levels back bit for
  // bit). A move that changes one device twice is taken back last change first.
  void take_back(const State& s) {
    peak_[s.d] = s.peak;
    count_[s.d] = s.count;
  }

 private:
  void rescan(std::size_t d, int at = -1, double level_at = 0) {
    double pk = 0;
    int count = 0;
    for (int i = 0; i < per_device_; ++i) {
      const double v = i == at ? level_at : tl_.device_level(static_cast<int>(d), i);
      if (v > pk) {
        pk = v;
        count = 1;
      } else if (v == pk) {
        ++count;
      }
    }
    peak_[d] = pk;
    count_[d] = count;
  }
  const Timeline& tl_;
  int per_device_;
  std::vector<double> peak_;
  std::vector<int> count_;
};

// The neighbours both walks propose: a swap of two adjacent subtasks on one device or,
// with probability `chain_share`, a chain move (ChainMove: one swap on each of several
// devices). The swaps a neighbour makes are known when it is drawn, before it is timed.
class Neighbours {
 public:
  Neighbours(const Problem& p, double chain_share, double critical_share = 0)
      : p_(p), chain_(p), share_(chain_share), critical_share_(critical_share),
        slots_(static_cast<std::uint64_t>(std::max(0, p.per_device - 1))) {}
  // Draws the next neighbour; false when it is a chain with fewer than two members to move.
  bool draw(const Timeline& tl, Rng& rng) {
    chain_move_ = share_ > 0 && rng.uniform() < share_;
    if (chain_move_) {
      const auto t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(p_.num_tasks)));
      const int dir = rng.below(2) == 0 ? 1 : -1;
      return chain_.plan(tl, t, dir);
    }
    if (critical_share_ > 0 && rng.uniform() < critical_share_) {
      // A subtask on a longest path, swapped with its neighbour before or after it on
      // its device: only such swaps can shorten the makespan.
      for (int tries = 0; tries < 64; ++tries) {
        const auto t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(p_.num_tasks)));
        if (!tl.critical(t)) continue;
        const int i = tl.position(t) - static_cast<int>(rng.below(2));
        if (i < 0 || i + 1 >= p_.per_device) continue;
        single_[0] = {p_.device[static_cast<std::size_t>(t)], i};
        return true;
      }
    }
    single_[0] = {static_cast<int>(rng.below(static_cast<std::uint64_t>(p_.devices))), static_cast<int>(rng.below(slots_))};
    return true;
  }
  bool chain_move() const { return chain_move_; }
  // Device and position of each swap (it and the next one swap).
  const std::vector<std::pair<int, int>>& swaps() const { return chain_move_ ? chain_.planned() : single_; }
  SwapResult apply(Timeline& tl, double threshold) {
    return chain_move_ ? chain_.apply(tl, threshold) : tl.swap(single_[0].first, single_[0].second, threshold);
  }

 private:
  const Problem& p_;
  ChainMove chain_;
  double share_, critical_share_;
  std::uint64_t slots_;
  bool chain_move_ = false;
  std::vector<std::pair<int, int>> single_ = std::vector<std::pair<int, int>>(1);
};

}  // namespace

TieBreak parse_tie_break(const std::string& name) {
  if (name == "none") return TieBreak::none;
  if (name == "finish") return TieBreak::finish;
  if (name == "flow") return TieBreak::flow;
  if (name == "critical") return TieBreak::critical;
  if (name == "memory") return TieBreak::memory;
  throw std::invalid_argument("unknown tie-break '" + name + "' (none, finish, flow, critical, memory)");
}

const char* tie_break_name(TieBreak t) {
  switch (t) {
    case TieBreak::none: return "none";
    case TieBreak::finish: return "finish";
    case TieBreak::flow: return "flow";
    case TieBreak::critical: return "critical";
    case TieBreak::memory: return "memory";
  }
  return "?";
}

AnnealResult anneal(const Problem& p, const Order& start, double bound, const AnnealOptions& opt,
                    const AnnealReport& report) {
  AnnealResult out;
  const auto began = Clock::now();
  auto tl = std::make_unique<Timeline>(p, start);
  Rng rng(opt.seed, opt.stream);

  const double mean_dur = std::accumulate(p.dur.begin(), p.dur.end(), 0.0) / std::max(1, p.num_tasks);
  // A typical subtask's duration: hot enough to climb out of the greedy start on
  // integer costs, where the smallest step of the makespan is a whole unit
  // (docs/notes/schedgen-latency-search.md measures 0.1 x, 1 x and 2 x on both encodings of Table 3).
  const double t0 = opt.t0 > 0 ? opt.t0 : opt.t0_factor * mean_dur;
  const double eps = opt.epsilon > 0 ? opt.epsilon : t0 * 1e-4;
  const bool bounded = opt.iterations > 0 || opt.time_limit > 0;

  // A little memory in the energy lets the walk along equal makespans drift
  // towards schedules that hold fewer activations.
  double mean_act = 0;
  for (double v : p.mem_delta) mean_act += std::fabs(v) / std::max(1, p.num_tasks);
  const double mu = mean_act > 0 ? opt.mem_weight * mean_dur / mean_act : 0.0;
  std::optional<PeakTracker> peaks;
  peaks.emplace(*tl, p.devices, p.per_device);
  auto energy = [&] { return mu > 0 ? tl->makespan() + mu * peaks->max_peak() : tl->makespan(); };
  // The peaks are kept up to date when the energy or the tie-break reads them.
  const bool track_peaks = mu > 0 || opt.tie_break == TieBreak::memory;
  // The memory tie-break in time units: one mean activation weighs one mean subtask.
  const double mem_tie_scale = mean_act > 0 ? mean_dur / mean_act : 0.0;
  auto memory_tie = [&] {
    double sum = 0;
    for (int dd = 0; dd < p.devices; ++dd) sum += peaks->peak(static_cast<std::size_t>(dd));
    return mem_tie_scale * (peaks->max_peak() + 0.25 * sum / p.devices);
  };
  // The tie-break: under equal makespans a move may raise it by dx only with
  // probability exp(-dx / T) (Metropolis on the second key of a lexicographic energy).
  auto tie = [&] {
    switch (opt.tie_break) {
      case TieBreak::none: return 0.0;
      case TieBreak::finish: return opt.tie_weight * tl->finish_sum();
      case TieBreak::flow: return opt.tie_weight * tl->end_sum();
      case TieBreak::critical: return opt.tie_weight * tl->critical_count();
      case TieBreak::memory: return opt.tie_weight * memory_tie();
    }
    return 0.0;
  };
  double current = energy();
  double current_makespan = tl->makespan(), current_tie = tie();
  double best = current_makespan, best_tie = current_tie;
  Order best_order = tl->order();
  // Rounds cycle through start temperatures (hot ones climb out of deep basins,
  // cold ones descend narrow ones; Table 3 needs both); rank r starts the cycle
  // at its r-th entry, so ranks anneal at different temperatures at once.
  const std::vector<double> cycle = opt.t0_cycle.empty() ? std::vector<double>{1.0} : opt.t0_cycle;
  auto round_t0 = [&](std::uint64_t round) { return t0 * cycle[(round + opt.stream) % cycle.size()]; };
  double temperature = round_t0(0);
  AnnealStats& st = out.stats;
  st.rounds = 1;
  auto reached = [&] { return at_most(best, bound); };
  auto jump_to = [&](const Order& order) {
    tl = std::make_unique<Timeline>(p, order);
    peaks.emplace(*tl, p.devices, p.per_device);
    current = energy();
    current_makespan = tl->makespan();
    current_tie = tie();
  };

  const auto slots = static_cast<std::uint64_t>(std::max(0, p.per_device - 1));
  // Some tiny problems have no valid neighbour at all (one F and its B per
  // device); give up after this many refusals in a row.
  const std::uint64_t hopeless = std::max<std::uint64_t>(1'000'000, 20 * slots * static_cast<std::uint64_t>(p.devices));
  std::uint64_t proposals = 0, refused_in_a_row = 0;
  Neighbours next(p, opt.chain_moves, opt.critical_moves);
  std::vector<PeakTracker::State> saved;  // the peaks a move changes, while it is judged
  std::uint64_t next_sync = opt.sync_every > 0 ? opt.sync_every : std::numeric_limits<std::uint64_t>::max();
  // Under a time limit alone the result depends on timing anyway: ranks then meet by
  // the clock, so that none waits at a meeting for a peer whose neighbours cost more.
  const bool sync_by_clock = meets_by_clock(opt);
  double next_sync_time = opt.sync_seconds;
  bool sync_due = false;
  bool out_of_time = false;
  bool peer_best = false;  // the best is a peer's, not yet restarted from
  for (;;) {
    const bool wants_stop = reached() || slots == 0 || refused_in_a_row >= hopeless || out_of_time ||
                            (opt.iterations > 0 && st.iterations >= opt.iterations);
    if (opt.sync && (wants_stop || (sync_by_clock ? sync_due : st.iterations >= next_sync))) {
      next_sync = st.iterations + std::max<std::uint64_t>(opt.sync_every, 1);
      const SyncReply reply = opt.sync({best, best_tie, reached(), wants_stop}, best_order);
      if (sync_by_clock) {
        next_sync_time = seconds_since(began) + opt.sync_seconds;  // the ranks leave a meeting together
        sync_due = false;
      }
      if (reply.adopt != nullptr && !reached()) {
        // A peer's better schedule becomes this search's best; the walk goes on where it
        // stands and restarts from it at its next reheat (jumping at once, at the present
        // temperature, melted the peer's colder state: docs/notes/schedgen-two-ranks.md).
        best_order = *reply.adopt;
        best = reply.adopt_makespan;
        best_tie = reply.adopt_tie;
        peer_best = true;
        ++st.adopted;
      }
      if (reply.stop) {
        st.stopped_by_peer = reply.peer_reached_bound && !reached();
        break;
      }
    } else if (wants_stop) {
      break;
    }
    if (++proposals % kCheckEvery == 0) {
      const double now = seconds_since(began);
      if (opt.time_limit > 0 && now >= opt.time_limit) out_of_time = true;
      if (sync_by_clock && (now >= next_sync_time || (opt.meeting_called && opt.meeting_called()))) sync_due = true;
      if (report) report(st.iterations, tl->makespan(), best);
    }
    const bool planned = next.draw(*tl, rng);
    const bool chain_move = next.chain_move();
    // Metropolis with the random number drawn first: accept iff the new makespan
    // is at most current - T ln u, which lets the timeline stop early otherwise.
    const double u = rng.uniform();
    const double slack = u > 0 ? -temperature * std::log(u) : std::numeric_limits<double>::infinity();
    const double threshold = current + slack;
    if (!planned) {
      ++st.invalid;
      ++refused_in_a_row;
      continue;
    }
    // The energy is at least the makespan, so a makespan above the threshold is
    // refused either way; for a swap, the memory it would hold tightens that.
    double makespan_threshold = threshold;
    if (mu > 0 && !chain_move) {
      const auto [d, i] = next.swaps()[0];
      makespan_threshold -= mu * peaks->max_after(static_cast<std::size_t>(d), tl->device_level(d, i),
                                                  tl->level_if_swapped(d, i));
    }
    // The levels a move changes (one per device) are known before it is timed.
    saved.clear();
    if (track_peaks) {
      for (const auto& [d, i] : next.swaps()) {
        saved.push_back(peaks->state(static_cast<std::size_t>(d)));
        peaks->apply_swap(d, i);
      }
    }
    // After the move is taken back on the timeline (or refused while timed).
    auto restore_peaks = [&] {
      for (auto s = saved.rbegin(); s != saved.rend(); ++s) peaks->take_back(*s);
    };
    const SwapResult r = next.apply(*tl, makespan_threshold);  // = threshold for a chain move
    if (r != SwapResult::done) restore_peaks();
    if (r == SwapResult::invalid) {
      ++st.invalid;
      ++refused_in_a_row;
      continue;
    }
    refused_in_a_row = 0;
    ++st.iterations;
    if (r == SwapResult::done) {
      const double e = energy();
      const double mk = tl->makespan();
      bool keep = e <= threshold;
      double tv = current_tie;
      if (keep && same_time(mk, current_makespan)) {
        ++st.plateau;
        // u was not needed to accept this move on the makespan: it decides the
        // tie-break, so equal makespans still have a slope.
        tv = tie();
        if (tv - current_tie > slack) {
          keep = false;
          ++st.tie_refused;
        }
      } else if (keep) {
        tv = tie();
      }
      if (!keep) {
        tl->undo();  // bit for bit, memory levels too
        restore_peaks();
      } else {
        ++st.accepted;
        current = e;
        current_makespan = mk;
        current_tie = tv;
        const bool better = same_time(mk, best) ? tv < best_tie && !same_time(tv, best_tie) : mk < best;
        if (better) {
          if (mk < best && !same_time(mk, best)) st.seconds_to_best = seconds_since(began);
          best = mk;
          best_tie = tv;
          best_order = tl->order();
        }
      }
    }
    temperature *= opt.alpha;
    if (temperature < eps) {
      if (!bounded) {
        out_of_time = true;  // one round only: stop (at the next sync point, with peers)
        temperature = eps;
        continue;
      }
      // Cold: a new round, hot again; from the best schedule when it is better.
      temperature = round_t0(st.rounds);
      ++st.rounds;
      const bool behind = same_time(current_makespan, best) ? current_tie > best_tie && !same_time(current_tie, best_tie)
                                                            : current_makespan > best;
      if ((opt.restart_from_best || peer_best) && behind) {
        jump_to(best_order);
        ++st.restarts;
      }
      peer_best = false;
    }
  }
  st.seconds = seconds_since(began);
  st.reached_bound = reached();
  if (report) report(st.iterations, tl->makespan(), best);
  if (st.stopped_by_peer) {
    out.order = std::move(best_order);
    const Timing t = evaluate(p, out.order);
    out.makespan = t.makespan;
    out.peak_memory = t.peak_memory;
    return out;
  }

  const double mem_limit = opt.mem_time_limit > 0 ? opt.mem_time_limit : opt.time_limit / 2;
  if (!opt.memory_pass) {
    out.order = std::move(best_order);
    const Timing t = evaluate(p, out.order);
    out.makespan = t.makespan;
    out.peak_memory = t.peak_memory;
    return out;
  }
  out.order = lower_memory(p, best_order, memory_pass_iterations(opt, mem_limit), mem_limit, opt.mem_target, opt.seed,
                           opt.stream + 0x5eed, &st, opt.mem_t0_factor, opt.mem_chain_moves, opt.mem_level_margin);
  const Timing t = evaluate(p, out.order);
  out.makespan = t.makespan;
  out.peak_memory = t.peak_memory;
  return out;
}

bool meets_by_clock(const AnnealOptions& opt) {
  return opt.sync_seconds > 0 && opt.time_limit > 0 && opt.iterations == 0;
}

std::uint64_t memory_pass_iterations(const AnnealOptions& opt, double time_limit) {
  if (opt.mem_iterations > 0) return opt.mem_iterations;
  // Without a clock, a fixed budget keeps the result a function of the inputs; with
  // one, the pass uses all its time: on Table 3's 16/16 settings the peak keeps
  // falling well past 20M neighbours (docs/notes/schedgen-memory-pass.md).
  return time_limit > 0 ? std::numeric_limits<std::uint64_t>::max() : 20'000'000;
}

Order lower_memory(const Problem& p, const Order& start, std::uint64_t iterations, double time_limit,
                   double target, std::uint64_t seed, std::uint64_t stream, AnnealStats* stats,
                   double t0_factor, double chain_moves, double level_margin, const std::function<bool()>& stop) {
  const auto began = Clock::now();
  Timeline tl(p, start);
  tl.track_critical(false);  // the pass reads no tie-break and draws no critical moves
  Rng rng(seed, stream);
  const double limit = tl.makespan() * (1 + 1e-12);
  // Energy: the highest peak first; the mean of all peaks and how much memory
  // stands above a level, summed over subtasks, break its plateaus (lowering any
  // device, or shortening a high stretch, is progress towards lowering the
  // highest). The level is `level_margin` mean activations below the lowest
  // highest peak met so far, never below the target: the stretches at or near
  // the peak, not all the memory above serial 1F1B's peak, which on the large
  // settings is most of it (docs/notes/schedgen-memory-pass.md, "The energy"). A swap
  // changes one level of one device, so all three are kept up to date in O(1),
  // with a rescan of the device only when its sole peak falls (and of every device
  // when the level moves down with a new lowest peak).
  constexpr double wsum = 0.25, wex = 1.0;
  double mean_act = 0;
  for (double v : p.mem_delta) mean_act += std::fabs(v);
  mean_act /= std::max(1, p.num_tasks);
  if (mean_act <= 0 || p.per_device < 2) return start;
  const auto nd = static_cast<std::size_t>(p.devices);
  PeakTracker peaks(tl, p.devices, p.per_device);
  std::vector<double> excess(nd);
  double sum_peak = 0, sum_excess = 0, level = 0;
  for (std::size_t d = 0; d < nd; ++d) sum_peak += peaks.peak(d);
  auto level_for = [&](double lowest_peak) { return std::max(target, lowest_peak - level_margin * mean_act); };
  auto count_excess = [&](double lowest_peak) {
    level = level_for(lowest_peak);
    sum_excess = 0;
    for (std::size_t d = 0; d < nd; ++d) {
      excess[d] = tl.device_excess(static_cast<int>(d), level);
      sum_excess += excess[d];
    }
  };
  count_excess(peaks.max_peak());
  auto energy_at = [&](double max_peak) { return max_peak + wsum * sum_peak / p.devices + wex * sum_excess / p.num_tasks; };

  double current = energy_at(peaks.max_peak()), best = current;
  Order best_order = tl.order();
  double best_peak = peaks.max_peak();
  const double t_start = mean_act * t0_factor;
  double temperature = t_start;
  std::uint64_t done = 0, proposals = 0;
  // Cooling by 1e4 over the budget, whichever of iterations and time binds first.
  auto cool = [&] {
    double frac = static_cast<double>(done) / static_cast<double>(std::max<std::uint64_t>(iterations, 1));
    if (time_limit > 0) frac = std::max(frac, seconds_since(began) / time_limit);
    temperature = t_start * std::pow(1e-4, std::min(1.0, frac));
  };
  const auto slots = static_cast<std::uint64_t>(p.per_device - 1);
  const std::uint64_t hopeless = std::max<std::uint64_t>(1'000'000, 20 * slots * static_cast<std::uint64_t>(p.devices));
  std::uint64_t refused_in_a_row = 0, done_at_lowest_peak = 0;
  Neighbours next(p, chain_moves);
  std::vector<std::pair<PeakTracker::State, double>> saved;  // peak and excess of the devices a move changes
  // A pass whose highest peak has not fallen for 20M neighbours and for as long again as
  // it took to reach it is over (stats->mem_stalled): small problems end in seconds, and
  // the caller may spend what is left on another pass.
  while (done < iterations && refused_in_a_row < hopeless && !at_most(best_peak, target)) {
    if (++proposals % kCheckEvery == 0) {
      if (time_limit > 0 && seconds_since(began) >= time_limit) break;
      if (stop && stop()) break;
      if (done - done_at_lowest_peak > std::max<std::uint64_t>(20'000'000, done_at_lowest_peak)) {
        if (stats != nullptr) stats->mem_stalled = true;
        break;
      }
      cool();
    }
    if (!next.draw(tl, rng)) continue;
    const auto& swaps = next.swaps();
    // The energy first: a swap changes one level of one device, known before the
    // swap is timed, so a move the Metropolis test refuses costs O(1) per device
    // and only the moves it would keep pay for the retiming (which may still refuse
    // them). The retiming moves no level.
    saved.clear();
    for (const auto& [d, i] : swaps) {
      const auto du = static_cast<std::size_t>(d);
      saved.push_back({peaks.state(du), excess[du]});
      const auto [old_level, new_level] = peaks.apply_swap(d, i);
      excess[du] += std::max(0.0, new_level - level) - std::max(0.0, old_level - level);
      sum_peak += peaks.peak(du) - saved.back().first.peak;
      sum_excess += excess[du] - saved.back().second;
    }
    auto revert = [&] {
      for (std::size_t n = swaps.size(); n-- > 0;) {
        const auto du = static_cast<std::size_t>(swaps[n].first);
        const double moved_peak = peaks.peak(du);
        peaks.take_back(saved[n].first);
        sum_peak += peaks.peak(du) - moved_peak;
        sum_excess += saved[n].second - excess[du];
        excess[du] = saved[n].second;
      }
    };
    const double pk = peaks.max_peak();
    const double e = energy_at(pk);
    ++done;
    if (!(e <= current || rng.uniform() < std::exp((current - e) / temperature))) {
      revert();
      continue;
    }
    const SwapResult r = next.apply(tl, limit);
    if (r != SwapResult::done) {
      revert();
      if (r == SwapResult::invalid) {
        --done;
        ++refused_in_a_row;
      }
      continue;
    }
    refused_in_a_row = 0;
    current = e;
    // The best state: the lowest highest peak, then the lowest energy. A pass stalls
    // on its highest peak (the objective), not on the energy, whose tie-breaking terms
    // keep creeping down long after the peak has stopped moving.
    const bool lower_peak = pk < best_peak && !same_time(pk, best_peak);
    if (lower_peak || (same_time(pk, best_peak) && e < best)) {
      if (lower_peak) {
        done_at_lowest_peak = done;
        if (level_for(pk) < level) {
          count_excess(pk);  // the level comes down with the peak: the energy is counted anew
          current = energy_at(pk);
        }
      }
      best = current;
      best_order = tl.order();
      best_peak = pk;
    }
  }
  if (stats != nullptr) {
    stats->mem_iterations = done;
    stats->mem_seconds = seconds_since(began);
  }
  return best_order;
}

}  // namespace braid::sched
