#include "sched/baselines.hpp"

#include <algorithm>
#include <limits>

namespace braid::sched {

Order one_f_one_b(const Problem& p) {
  Order order;
  order.reserve(static_cast<std::size_t>(p.num_tasks));
  for (int d = 0; d < p.devices; ++d) {
    for (int m = 0; m < static_cast<int>(p.spec.models.size()); ++m) {
      const auto& ms = p.spec.models[static_cast<std::size_t>(m)];
      const int r = p.replica_on(m, d), s = p.stage_on(m, d), mb = ms.micro_batches;
      const int warmup = std::min(ms.stages - s - 1, mb);
      for (int j = 0; j < warmup; ++j) order.push_back(p.task_id(m, r, s, j, Kind::F));
      for (int j = 0; j + warmup < mb; ++j) {
        order.push_back(p.task_id(m, r, s, j + warmup, Kind::F));
        order.push_back(p.task_id(m, r, s, j, Kind::B));
      }
      for (int j = mb - warmup; j < mb; ++j) order.push_back(p.task_id(m, r, s, j, Kind::B));
    }
  }
  return order;
}

std::optional<Order> greedy(const Problem& p) {
  const int nm = static_cast<int>(p.spec.models.size());
  const auto n = static_cast<std::size_t>(p.num_tasks);
  const double cap = p.spec.mem_capacity.value_or(std::numeric_limits<double>::infinity());
  std::vector<double> end(n, 0.0);
  std::vector<std::uint8_t> done(n, 0);
  std::vector<double> free_at(static_cast<std::size_t>(p.devices), 0.0), level(free_at.size(), 0.0);
  std::vector<int> next_f(static_cast<std::size_t>(p.devices * nm), 0), next_b(next_f.size(), 0);
  std::vector<std::vector<std::int32_t>> per_device(static_cast<std::size_t>(p.devices));

  // Models by work per stage on the device, largest first (the paper's tie rule).
  auto weight = [&](int d, int m) {
    const auto t = static_cast<std::size_t>(p.task_id(m, p.replica_on(m, d), p.stage_on(m, d), 0, Kind::F));
    return p.dur[t] + p.dur[t + static_cast<std::size_t>(p.spec.models[static_cast<std::size_t>(m)].micro_batches)];
  };
  std::vector<std::vector<int>> model_rank(static_cast<std::size_t>(p.devices));
  for (int d = 0; d < p.devices; ++d) {
    auto& ranks = model_rank[static_cast<std::size_t>(d)];
    for (int m = 0; m < nm; ++m) ranks.push_back(m);
    std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) { return weight(d, a) > weight(d, b); });
  }

  auto ready_time = [&](std::size_t t, int d) {
    double r = free_at[static_cast<std::size_t>(d)];
    if (p.pred[t] >= 0) r = std::max(r, end[static_cast<std::size_t>(p.pred[t])] + p.lag[t]);
    return r;
  };

  for (std::size_t placed = 0; placed < n; ++placed) {
    int best_device = -1;
    std::int32_t best_task = -1;
    double best_time = std::numeric_limits<double>::infinity();
    for (int d = 0; d < p.devices; ++d) {
      // This device's earliest decision time, then the favourite task ready then.
      double when = std::numeric_limits<double>::infinity();
      std::int32_t pick = -1;
      for (int m : model_rank[static_cast<std::size_t>(d)]) {
        const auto& ms = p.spec.models[static_cast<std::size_t>(m)];
        const int r = p.replica_on(m, d), s = p.stage_on(m, d);
        const auto slot = static_cast<std::size_t>(d * nm + m);
        for (Kind k : {Kind::B, Kind::F}) {
          const int j = k == Kind::B ? next_b[slot] : next_f[slot];
          if (j >= ms.micro_batches || (k == Kind::B && j >= next_f[slot])) continue;
          const auto t = static_cast<std::size_t>(p.task_id(m, r, s, j, k));
          if (p.pred[t] >= 0 && !done[static_cast<std::size_t>(p.pred[t])]) continue;
          if (k == Kind::F && level[static_cast<std::size_t>(d)] + p.mem_delta[t] > cap * (1 + 1e-12)) continue;
          const double rt = ready_time(t, d);
          if (rt < when) {
            when = rt;
            pick = static_cast<std::int32_t>(t);
          }
        }
      }
      if (pick >= 0 && when < best_time) {
        best_time = when;
        best_device = d;
        best_task = pick;
      }
    }
    if (best_device < 0) return std::nullopt;
    const auto t = static_cast<std::size_t>(best_task);
    const auto d = static_cast<std::size_t>(best_device);
    done[t] = 1;
    end[t] = best_time + p.dur[t];
    free_at[d] = end[t];
    level[d] += p.mem_delta[t];
    const auto slot = d * static_cast<std::size_t>(nm) + static_cast<std::size_t>(p.model[t]);
    (p.kind[t] == Kind::F ? next_f : next_b)[slot]++;
    per_device[d].push_back(best_task);
  }
  Order order;
  order.reserve(n);
  for (const auto& v : per_device) order.insert(order.end(), v.begin(), v.end());
  return order;
}

BaselineResult serial_1f1b(const SchedSpec& spec) {
  BaselineResult out;
  for (int m = 0; m < static_cast<int>(spec.models.size()); ++m) {
    const Problem alone = build_problem(only_model(spec, m));
    const Timing t = evaluate(alone, one_f_one_b(alone));
    out.makespan += t.makespan;
    out.peak_memory = std::max(out.peak_memory, t.peak_memory);
  }
  return out;
}

}  // namespace braid::sched
