#include "plan/run_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace braid::plan {

double Timeline::stretch(const std::vector<Task>& tasks, const std::vector<int>& which) const {
  double work = 0, wall = 0;
  for (int i : which) {
    const auto k = static_cast<std::size_t>(i);
    if (tasks[k].threads == 0) continue;
    work += tasks[k].work;
    wall += end[k] - start[k];
  }
  return work > 0 ? wall / work : 1.0;
}

int add(std::vector<Task>& tasks, Task t) {
  tasks.push_back(std::move(t));
  return static_cast<int>(tasks.size()) - 1;
}

Timeline simulate_shared(const std::vector<Task>& tasks, int cores) {
  const std::size_t n = tasks.size();
  for (std::size_t i = 0; i < n; ++i) {
    for (int a : tasks[i].after) {
      if (a < 0 || static_cast<std::size_t>(a) >= i) {
        throw std::invalid_argument(fmt::format("task {} ({}) waits on task {}, not an earlier one", i, tasks[i].name, a));
      }
    }
  }
  Timeline tl;
  tl.start.assign(n, -1);
  tl.end.assign(n, -1);
  std::vector<double> left(n);
  for (std::size_t i = 0; i < n; ++i) left[i] = std::max(0.0, tasks[i].work);
  // The order of each lane's tasks, and where each lane is.
  int lanes = 0;
  for (const auto& t : tasks) lanes = std::max(lanes, t.lane + 1);
  std::vector<std::vector<std::size_t>> order(static_cast<std::size_t>(lanes));
  for (std::size_t i = 0; i < n; ++i) order[static_cast<std::size_t>(tasks[i].lane)].push_back(i);
  std::vector<std::size_t> head(static_cast<std::size_t>(lanes), 0);
  std::vector<double> lane_free(static_cast<std::size_t>(lanes), 0);
  double now = 0;
  std::size_t done = 0;
  while (done < n) {
    // Start every lane's next task whose inputs are there.
    std::vector<std::size_t> running;
    for (std::size_t l = 0; l < order.size(); ++l) {
      if (head[l] >= order[l].size()) continue;
      const std::size_t i = order[l][head[l]];
      const bool ready = std::all_of(tasks[i].after.begin(), tasks[i].after.end(),
                                     [&](int a) { return tl.end[static_cast<std::size_t>(a)] >= 0; });
      if (!ready) continue;
      if (tl.start[i] < 0) tl.start[i] = now;
      running.push_back(i);
    }
    if (running.empty()) throw std::invalid_argument("the tasks wait on each other in a circle");
    int threads = 0;
    for (std::size_t i : running) threads += tasks[i].threads;
    const double rate = cores > 0 && threads > cores ? static_cast<double>(cores) / threads : 1.0;
    double step = std::numeric_limits<double>::infinity();
    for (std::size_t i : running) step = std::min(step, left[i] / (tasks[i].threads == 0 ? 1.0 : rate));
    now += step;
    for (std::size_t i : running) {
      left[i] -= step * (tasks[i].threads == 0 ? 1.0 : rate);
      if (left[i] <= 1e-12) {
        left[i] = 0;
        tl.end[i] = now;
        ++head[static_cast<std::size_t>(tasks[i].lane)];
        ++done;
      }
    }
  }
  tl.makespan = now;
  return tl;
}

std::vector<double> shard_end_fractions(const std::vector<int>& lengths, int per_replica, int shard_size,
                                        int max_batch) {
  std::vector<double> out;
  if (per_replica <= 0 || shard_size <= 0) return out;
  const int shards = (per_replica + shard_size - 1) / shard_size;
  const int longest = lengths.empty() ? 1 : std::max(1, lengths.back());
  if (per_replica > max_batch || lengths.empty()) {
    for (int k = 1; k <= shards; ++k) out.push_back(static_cast<double>(k) / shards);
    return out;
  }
  // The k-th smallest of `shards` maxima of shard_size draws sits near quantile
  // (k / (shards + 1)) ^ (1 / shard_size) of the lengths.
  const double n = static_cast<double>(lengths.size());
  for (int k = 1; k <= shards; ++k) {
    const double q = std::pow(static_cast<double>(k) / (shards + 1), 1.0 / shard_size);
    const auto at = static_cast<std::size_t>(std::min(n - 1, std::floor(q * n)));
    out.push_back(static_cast<double>(lengths[at]) / longest);
  }
  out.back() = 1.0;  // the replica's call ends with its last shard
  return out;
}

double time_at_fraction(const GenTimeline& g, double fraction) {
  if (g.blocks.empty()) return g.end;
  int steps = 0;
  for (const auto& b : g.blocks) steps = std::max(steps, b.step0 + b.steps);
  const double target = std::clamp(fraction, 0.0, 1.0) * steps;
  for (std::size_t k = 0; k < g.blocks.size(); ++k) {
    const auto& b = g.blocks[k];
    if (target <= b.step0 + b.steps) {
      const double block_end = k + 1 < g.blocks.size() ? g.blocks[k + 1].start : g.end;
      const double within = b.steps > 0 ? (target - b.step0) / b.steps : 1.0;
      return b.start + std::max(0.0, within) * (block_end - b.start);
    }
  }
  return g.end;
}

}  // namespace braid::plan
