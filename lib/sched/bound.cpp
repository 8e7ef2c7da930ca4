// The paper's per-stage bound takes, for one device, the earliest moment its
// first subtask can arrive, plus all its work, plus the shortest chain that
// must still run after its last subtask. Taking the minimum head and tail over
// all models on the device is weak when a small model's first stage sits beside
// a large model's last stage, so the bound is taken over every subset of the
// models on the device (the subset {actor} alone gives the actor's 1F1B time,
// the paper's "critical path on the large model").
#include "sched/bound.hpp"

#include <algorithm>
#include <limits>

namespace braid::sched {

LowerBound lower_bound(const Problem& p) {
  const auto n = static_cast<std::size_t>(p.num_tasks);
  const int nm = static_cast<int>(p.spec.models.size());
  // head: longest chain of data predecessors before a subtask can start;
  // tail: longest chain of data successors after it ends. Chains are paths, so
  // one walk per chain start fills them.
  std::vector<double> head(n, 0.0), tail(n, 0.0);
  for (std::size_t t = 0; t < n; ++t) {
    if (p.pred[t] >= 0) continue;
    double h = 0;
    for (auto u = static_cast<std::int32_t>(t); u >= 0; u = p.succ[static_cast<std::size_t>(u)]) {
      const auto ui = static_cast<std::size_t>(u);
      h += p.lag[ui];
      head[ui] = h;
      h += p.dur[ui];
    }
    // Walk back from the chain's end for the tails.
    auto last = static_cast<std::int32_t>(t);
    while (p.succ[static_cast<std::size_t>(last)] >= 0) last = p.succ[static_cast<std::size_t>(last)];
    double tl = 0;
    for (auto u = last; u >= 0; u = p.pred[static_cast<std::size_t>(u)]) {
      const auto ui = static_cast<std::size_t>(u);
      tail[ui] = tl;
      tl += p.dur[ui] + p.lag[ui];
    }
  }

  LowerBound lb;
  double total = 0;
  for (std::size_t t = 0; t < n; ++t) {
    total += p.dur[t];
    lb.critical_path = std::max(lb.critical_path, head[t] + p.dur[t] + tail[t]);
  }
  lb.average_work = total / p.devices;

  const int subsets = nm <= 12 ? (1 << nm) - 1 : 0;
  const double inf = std::numeric_limits<double>::infinity();
  for (int d = 0; d < p.devices; ++d) {
    std::vector<double> h(static_cast<std::size_t>(nm), inf), tl(h.size(), inf), work(h.size(), 0.0);
    for (int i = 0; i < p.per_device; ++i) {
      const auto t = static_cast<std::size_t>(d * p.per_device + i);
      const auto m = static_cast<std::size_t>(p.model[t]);
      h[m] = std::min(h[m], head[t]);
      tl[m] = std::min(tl[m], tail[t]);
      work[m] += p.dur[t];
    }
    auto consider = [&](unsigned mask) {
      double hh = inf, tt = inf, w = 0;
      for (int m = 0; m < nm; ++m) {
        if (!(mask >> m & 1U)) continue;
        hh = std::min(hh, h[static_cast<std::size_t>(m)]);
        tt = std::min(tt, tl[static_cast<std::size_t>(m)]);
        w += work[static_cast<std::size_t>(m)];
      }
      lb.per_device = std::max(lb.per_device, hh + w + tt);
    };
    if (subsets > 0) {
      for (int mask = 1; mask <= subsets; ++mask) consider(static_cast<unsigned>(mask));
    } else {
      for (int m = 0; m < nm && m < 32; ++m) consider(1U << m);
    }
    // With many models only singletons and the whole device are tried.
    if (subsets == 0) {
      double hh = inf, tt = inf, w = 0;
      for (int m = 0; m < nm; ++m) {
        hh = std::min(hh, h[static_cast<std::size_t>(m)]);
        tt = std::min(tt, tl[static_cast<std::size_t>(m)]);
        w += work[static_cast<std::size_t>(m)];
      }
      lb.per_device = std::max(lb.per_device, hh + w + tt);
    }
  }
  lb.value = std::max({lb.per_device, lb.critical_path, lb.average_work});
  lb.binding = lb.value == lb.per_device ? "per_device" : lb.value == lb.critical_path ? "critical_path" : "average_work";
  return lb;
}

}  // namespace braid::sched
