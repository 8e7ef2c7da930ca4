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

  double current = tl.makespan();
  double best = current;
  Order best_order = tl.order();
  double temperature = t0;
  AnnealStats& st = out.stats;
  st.rounds = 1;
  auto reached = [&] { return best <= bound || same_time(best, bound); };

  const auto slots = static_cast<std::uint64_t>(p.per_device - 1);
  std::uint64_t proposals = 0;
  while (!reached() && slots > 0) {
    if (opt.iterations > 0 && st.iterations >= opt.iterations) break;
    if (++proposals % kCheckEvery == 0) {
      if (opt.time_limit > 0 && seconds_since(began) >= opt.time_limit) break;
      if (report) report(st.iterations, current, best);
    }
    const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
    const int i = static_cast<int>(rng.below(slots));
    // Metropolis with the random number drawn first: accept iff the new makespan
    // is at most current - T ln u, which lets the timeline stop early otherwise.
    const double u = rng.uniform();
    const double threshold = u > 0 ? current - temperature * std::log(u) : std::numeric_limits<double>::infinity();
    const SwapResult r = tl.swap(d, i, threshold);
    if (r == SwapResult::invalid) {
      ++st.invalid;
      continue;
    }
    ++st.iterations;
    if (r == SwapResult::done) {
      const double e = tl.makespan();
      ++st.accepted;
      current = e;
      if (e < best && !same_time(e, best)) {
        best = e;
        best_order = tl.order();
        st.seconds_to_best = seconds_since(began);
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
  if (report) report(st.iterations, current, best);

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
  const double limit = tl.makespan();
  // Energy: the highest peak first; the mean of all peaks and how much memory
  // stands above the target, over time, break its plateaus (lowering any device,
  // or shortening a high stretch, is progress towards lowering the highest).
  constexpr double wsum = 0.25, wex = 1.0;
  std::vector<double> peaks(static_cast<std::size_t>(p.devices)), excess(peaks.size());
  for (int d = 0; d < p.devices; ++d) {
    peaks[static_cast<std::size_t>(d)] = tl.device_peak(d);
    excess[static_cast<std::size_t>(d)] = tl.device_excess(d, target);
  }
  auto energy = [&] {
    double mx = 0, sum = 0, ex = 0;
    for (std::size_t d = 0; d < peaks.size(); ++d) {
      mx = std::max(mx, peaks[d]);
      sum += peaks[d];
      ex += excess[d];
    }
    return mx + wsum * sum / p.devices + wex * ex / p.num_tasks;
  };
  double mean_act = 0;
  for (double v : p.mem_delta) mean_act += std::fabs(v);
  mean_act /= std::max(1, p.num_tasks);
  if (mean_act <= 0 || p.per_device < 2) return start;

  double current = energy(), best = current;
  Order best_order = tl.order();
  double temperature = mean_act * 0.5;
  const double alpha = std::pow(1e-4, 1.0 / static_cast<double>(std::max<std::uint64_t>(iterations, 1)));
  const auto slots = static_cast<std::uint64_t>(p.per_device - 1);
  std::uint64_t done = 0, proposals = 0;
  auto max_peak = [&] { return *std::max_element(peaks.begin(), peaks.end()); };
  double best_peak = max_peak();
  while (done < iterations && !(best_peak <= target || same_time(best_peak, target))) {
    if (++proposals % kCheckEvery == 0 && time_limit > 0 && seconds_since(began) >= time_limit) break;
    const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
    const int i = static_cast<int>(rng.below(slots));
    const SwapResult r = tl.swap(d, i, limit * (1 + 1e-12));
    if (r == SwapResult::invalid) continue;
    ++done;
    if (r == SwapResult::done) {
      const double old_peak = peaks[static_cast<std::size_t>(d)];
      const double old_excess = excess[static_cast<std::size_t>(d)];
      peaks[static_cast<std::size_t>(d)] = tl.device_peak(d);
      excess[static_cast<std::size_t>(d)] = tl.device_excess(d, target);
      const double e = energy();
      if (e <= current || rng.uniform() < std::exp((current - e) / temperature)) {
        current = e;
        if (e < best) {
          best = e;
          best_order = tl.order();
          best_peak = max_peak();
        }
      } else {
        peaks[static_cast<std::size_t>(d)] = old_peak;
        excess[static_cast<std::size_t>(d)] = old_excess;
        tl.undo();
      }
    }
    temperature *= alpha;
  }
  if (stats != nullptr) {
    stats->mem_iterations = done;
    stats->mem_seconds = seconds_since(began);
  }
  return best_order;
}

}  // namespace braid::sched
