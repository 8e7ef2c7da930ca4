#include "sched/anneal.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/rng.hpp"
#include "sched/timeline.hpp"

namespace braid::sched {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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
  void apply(std::size_t d, double old_level, double new_level) {
    saved_d_ = d;
    saved_peak_ = peak_[d];
    saved_count_ = count_[d];
    if (old_level == peak_[d]) --count_[d];
    if (new_level > peak_[d]) {
      peak_[d] = new_level;
      count_[d] = 1;
    } else if (new_level == peak_[d]) {
      ++count_[d];
    }
    if (count_[d] == 0) rescan(d);
  }
  void revert() {
    peak_[saved_d_] = saved_peak_;
    count_[saved_d_] = saved_count_;
  }

 private:
  void rescan(std::size_t d) {
    double pk = 0;
    int count = 0;
    for (int i = 0; i < per_device_; ++i) {
      const double v = tl_.device_level(static_cast<int>(d), i);
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
  std::size_t saved_d_ = 0;
  double saved_peak_ = 0;
  int saved_count_ = 0;
};

}  // namespace

AnnealResult anneal(const Problem& p, const Order& start, double bound, const AnnealOptions& opt,
                    const AnnealReport& report) {
  AnnealResult out;
  const auto began = Clock::now();
  Timeline tl(p, start);
  Rng rng(opt.seed, opt.stream);

  const double mean_dur = std::accumulate(p.dur.begin(), p.dur.end(), 0.0) / std::max(1, p.num_tasks);
  // Hot enough to trade a tenth of a typical subtask for a better layout, no
  // more: hotter starts wander off into long schedules (measured on Table 3).
  const double t0 = opt.t0 > 0 ? opt.t0 : 0.1 * mean_dur;
  const double eps = opt.epsilon > 0 ? opt.epsilon : t0 * 1e-4;
  const bool bounded = opt.iterations > 0 || opt.time_limit > 0;

  // A little memory in the energy lets the walk along equal makespans drift
  // towards schedules that hold fewer activations.
  double mean_act = 0;
  for (double v : p.mem_delta) mean_act += std::fabs(v) / std::max(1, p.num_tasks);
  const double mu = mean_act > 0 ? opt.mem_weight * mean_dur / mean_act : 0.0;
  PeakTracker peaks(tl, p.devices, p.per_device);
  auto energy = [&] { return mu > 0 ? tl.makespan() + mu * peaks.max_peak() : tl.makespan(); };
  double current = energy();
  double best = tl.makespan();
  Order best_order = tl.order();
  double temperature = t0;
  AnnealStats& st = out.stats;
  st.rounds = 1;
  auto reached = [&] { return best <= bound || same_time(best, bound); };

  const auto slots = static_cast<std::uint64_t>(p.per_device - 1);
  // Some tiny problems have no valid neighbour at all (one F and its B per
  // device); give up after this many refusals in a row.
  const std::uint64_t hopeless = std::max<std::uint64_t>(1'000'000, 20 * slots * static_cast<std::uint64_t>(p.devices));
  std::uint64_t proposals = 0, refused_in_a_row = 0;
  while (!reached() && slots > 0 && refused_in_a_row < hopeless) {
    if (opt.iterations > 0 && st.iterations >= opt.iterations) break;
    if (++proposals % kCheckEvery == 0) {
      if (opt.time_limit > 0 && seconds_since(began) >= opt.time_limit) break;
      if (report) report(st.iterations, tl.makespan(), best);
      if (opt.peer_reached_bound && opt.peer_reached_bound()) {
        st.stopped_by_peer = true;
        break;
      }
    }
    const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
    const int i = static_cast<int>(rng.below(slots));
    // Metropolis with the random number drawn first: accept iff the new makespan
    // is at most current - T ln u, which lets the timeline stop early otherwise.
    const double u = rng.uniform();
    const double threshold = u > 0 ? current - temperature * std::log(u) : std::numeric_limits<double>::infinity();
    double makespan_threshold = threshold;
    double old_level = 0, new_level = 0;
    if (mu > 0) {
      const std::int32_t b = tl.order()[static_cast<std::size_t>(d * p.per_device + i + 1)];
      old_level = tl.device_level(d, i);
      new_level = (i > 0 ? tl.device_level(d, i - 1) : 0.0) + p.mem_delta[static_cast<std::size_t>(b)];
      makespan_threshold -= mu * peaks.max_after(static_cast<std::size_t>(d), old_level, new_level);
    }
    const SwapResult r = tl.swap(d, i, makespan_threshold);
    if (r == SwapResult::invalid) {
      ++st.invalid;
      ++refused_in_a_row;
      continue;
    }
    refused_in_a_row = 0;
    ++st.iterations;
    if (r == SwapResult::done) {
      if (mu > 0) peaks.apply(static_cast<std::size_t>(d), old_level, new_level);
      const double e = energy();
      if (e > threshold) {
        peaks.revert();
        tl.undo();
      } else {
        ++st.accepted;
        current = e;
        const double mk = tl.makespan();
        if (mk < best && !same_time(mk, best)) {
          best = mk;
          best_order = tl.order();
          st.seconds_to_best = seconds_since(began);
        }
      }
    }
    temperature *= opt.alpha;
    if (temperature < eps) {
      if (!bounded) break;
      // Cold: start a new round from the best schedule, hot again.
      temperature = t0;
      ++st.rounds;
    }
  }
  st.seconds = seconds_since(began);
  st.reached_bound = reached();
  if (report) report(st.iterations, tl.makespan(), best);
  if (st.reached_bound && opt.on_reached_bound) opt.on_reached_bound();
  if (st.stopped_by_peer) {
    out.order = std::move(best_order);
    const Timing t = evaluate(p, out.order);
    out.makespan = t.makespan;
    out.peak_memory = t.peak_memory;
    return out;
  }

  const double mem_limit = opt.mem_time_limit > 0 ? opt.mem_time_limit : opt.time_limit / 2;
  out.order = lower_memory(p, best_order, opt.mem_iterations, mem_limit, opt.mem_target, opt.seed,
                           opt.stream + 0x5eed, &st);
  const Timing t = evaluate(p, out.order);
  out.makespan = t.makespan;
  out.peak_memory = t.peak_memory;
  return out;
}

Order lower_memory(const Problem& p, const Order& start, std::uint64_t iterations, double time_limit,
                   double target, std::uint64_t seed, std::uint64_t stream, AnnealStats* stats) {
  const auto began = Clock::now();
  Timeline tl(p, start);
  Rng rng(seed, stream);
  const double limit = tl.makespan() * (1 + 1e-12);
  // Energy: the highest peak first; the mean of all peaks and how much memory
  // stands above the target, summed over subtasks, break its plateaus (lowering
  // any device, or shortening a high stretch, is progress towards lowering the
  // highest). A swap changes one level of one device, so all three are kept
  // up to date in O(1), with a rescan of the device only when its sole peak falls.
  constexpr double wsum = 0.25, wex = 1.0;
  const auto nd = static_cast<std::size_t>(p.devices);
  PeakTracker peaks(tl, p.devices, p.per_device);
  std::vector<double> excess(nd);
  double sum_peak = 0, sum_excess = 0;
  for (std::size_t d = 0; d < nd; ++d) {
    excess[d] = tl.device_excess(static_cast<int>(d), target);
    sum_peak += peaks.peak(d);
    sum_excess += excess[d];
  }
  auto energy = [&] { return peaks.max_peak() + wsum * sum_peak / p.devices + wex * sum_excess / p.num_tasks; };
  double mean_act = 0;
  for (double v : p.mem_delta) mean_act += std::fabs(v);
  mean_act /= std::max(1, p.num_tasks);
  if (mean_act <= 0 || p.per_device < 2) return start;

  double current = energy(), best = current;
  Order best_order = tl.order();
  double best_peak = peaks.max_peak();
  const double t_start = mean_act * 0.5;
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
  std::uint64_t refused_in_a_row = 0;
  while (done < iterations && refused_in_a_row < hopeless && !(best_peak <= target || same_time(best_peak, target))) {
    if (++proposals % kCheckEvery == 0) {
      if (time_limit > 0 && seconds_since(began) >= time_limit) break;
      cool();
    }
    const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
    const int i = static_cast<int>(rng.below(slots));
    const SwapResult r = tl.swap(d, i, limit);
    if (r == SwapResult::invalid) {
      ++refused_in_a_row;
      continue;
    }
    refused_in_a_row = 0;
    ++done;
    if (r != SwapResult::done) continue;
    const auto du = static_cast<std::size_t>(d);
    const double old_level = tl.swapped_level_before(), new_level = tl.swapped_level_after();
    const double saved_peak = peaks.peak(du), saved_excess = excess[du];
    peaks.apply(du, old_level, new_level);
    excess[du] += std::max(0.0, new_level - target) - std::max(0.0, old_level - target);
    sum_peak += peaks.peak(du) - saved_peak;
    sum_excess += excess[du] - saved_excess;
    const double e = energy();
    if (e <= current || rng.uniform() < std::exp((current - e) / temperature)) {
      current = e;
      if (e < best) {
        best = e;
        best_order = tl.order();
        best_peak = peaks.max_peak();
      }
    } else {
      sum_peak += saved_peak - peaks.peak(du);
      peaks.revert();
      sum_excess += saved_excess - excess[du];
      excess[du] = saved_excess;
      tl.undo();
    }
  }
  if (stats != nullptr) {
    stats->mem_iterations = done;
    stats->mem_seconds = seconds_since(began);
  }
  return best_order;
}

}  // namespace braid::sched
