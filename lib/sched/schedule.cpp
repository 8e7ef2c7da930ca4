#include "sched/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace braid::sched {

bool same_time(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)}); }

bool at_most(double a, double b) { return a < b || same_time(a, b); }

std::vector<double> device_peaks(const Problem& p, const Order& order) {
  std::vector<double> peaks(static_cast<std::size_t>(p.devices), 0.0);
  for (int d = 0; d < p.devices; ++d) {
    double level = 0, peak = 0;
    for (int i = 0; i < p.per_device; ++i) {
      level += p.mem_delta[static_cast<std::size_t>(order[static_cast<std::size_t>(d * p.per_device + i)])];
      peak = std::max(peak, level);
    }
    peaks[static_cast<std::size_t>(d)] = peak;
  }
  return peaks;
}

Timing evaluate(const Problem& p, const Order& order) {
  Timing t;
  const auto n = static_cast<std::size_t>(p.num_tasks);
  if (order.size() != n) {
    t.problem = fmt::format("the order has {} subtasks, the problem {}", order.size(), n);
    return t;
  }
  std::vector<std::int32_t> pos(n, -1);
  for (int d = 0; d < p.devices; ++d) {
    for (int i = 0; i < p.per_device; ++i) {
      const auto task = order[static_cast<std::size_t>(d * p.per_device + i)];
      if (task < 0 || static_cast<std::size_t>(task) >= n || pos[static_cast<std::size_t>(task)] >= 0 ||
          p.device[static_cast<std::size_t>(task)] != d) {
        t.problem = fmt::format("device {} position {}: subtask {} is not one of this device's, or repeats", d, i, task);
        return t;
      }
      pos[static_cast<std::size_t>(task)] = i;
    }
  }
  // Kahn's algorithm over the two kinds of edge: device order and data dependency.
  std::vector<std::uint8_t> missing(n, 0);
  std::vector<std::int32_t> ready;
  for (std::size_t task = 0; task < n; ++task) {
    missing[task] = static_cast<std::uint8_t>((pos[task] > 0 ? 1 : 0) + (p.pred[task] >= 0 ? 1 : 0));
    if (missing[task] == 0) ready.push_back(static_cast<std::int32_t>(task));
  }
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  std::size_t done = 0;
  while (!ready.empty()) {
    const auto task = static_cast<std::size_t>(ready.back());
    ready.pop_back();
    ++done;
    double s = 0;
    if (pos[task] > 0) {
      const auto prev = order[static_cast<std::size_t>(p.device[task] * p.per_device + pos[task] - 1)];
      s = t.end[static_cast<std::size_t>(prev)];
    }
    if (p.pred[task] >= 0) s = std::max(s, t.end[static_cast<std::size_t>(p.pred[task])] + p.lag[task]);
    t.start[task] = s;
    t.end[task] = s + p.dur[task];
    t.makespan = std::max(t.makespan, t.end[task]);
    auto release = [&](std::int32_t next) {
      if (next >= 0 && --missing[static_cast<std::size_t>(next)] == 0) ready.push_back(next);
    };
    if (pos[task] + 1 < p.per_device) release(order[static_cast<std::size_t>(p.device[task] * p.per_device + pos[task] + 1)]);
    release(p.succ[task]);
  }
  if (done != n) {
    t.problem = fmt::format("deadlock: {} of {} subtasks wait on each other in a cycle", n - done, n);
    return t;
  }
  t.device_peak = device_peaks(p, order);
  t.peak_memory = *std::max_element(t.device_peak.begin(), t.device_peak.end());
  t.valid = true;
  return t;
}

}  // namespace braid::sched
