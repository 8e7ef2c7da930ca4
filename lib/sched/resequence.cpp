#include "sched/resequence.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

namespace braid::sched {

namespace {


// A limit that leaves out the level x itself (device_levels keeps what is within
// its tolerance of the limit).
double just_below(double x) { return x * (1 - 1e-9) - 1e-9; }

std::size_t saturating_product(std::size_t a, std::size_t b) {
  return a > std::numeric_limits<std::size_t>::max() / b ? std::numeric_limits<std::size_t>::max() : a * b;
}

// One device's chains with their windows (per chain, per subtask).
struct Grid : DeviceChains {
  struct Windows {
    std::vector<double> release, deadline, dur;  // earliest start, latest end
  };
  std::vector<Windows> win;
};

Grid grid_of(const Problem& p, const std::vector<double>& end, const std::vector<double>& lf, int d) {
  Grid g;
  static_cast<DeviceChains&>(g) = device_chains(p, d);
  for (const auto& c : g.chains) {
    Grid::Windows w;
    for (const std::int32_t x : c.tasks) {
      const auto xi = static_cast<std::size_t>(x);
      const std::int32_t pr = p.pred[xi], sc = p.succ[xi];
      // A predecessor on this device is the F of the same micro-batch (the last
      // stage's B), which the chain counts already keep in front.
      const bool pred_here = pr < 0 || p.device[static_cast<std::size_t>(pr)] == d;
      w.release.push_back(pred_here ? 0.0 : end[static_cast<std::size_t>(pr)] + p.lag[xi]);
      const bool succ_here = sc < 0 || p.device[static_cast<std::size_t>(sc)] == d;
      const auto si = static_cast<std::size_t>(sc);
      w.deadline.push_back(succ_here ? kInf : lf[si] - p.dur[si] - p.lag[si]);
      w.dur.push_back(p.dur[xi]);
    }
    g.win.push_back(std::move(w));
  }
  return g;
}

// The dynamic program for one memory limit: the earliest time the device can have
// run each point's subtasks with every level at most x, meeting every window
// (ends at most `makespan`); `from` records the chain each point was reached by.
// True when the whole grid can be run.
bool fits(const Grid& g, double x, double makespan, std::vector<double>& earliest, std::vector<std::int8_t>& from) {
  const std::size_t nc = g.chains.size();
  earliest.assign(g.points, kInf);
  from.assign(g.points, -1);
  earliest[0] = 0;
  std::vector<int> count(nc, 0);
  const double x_tol = x + 1e-9 * std::max(1.0, std::fabs(x));
  const double tol = 1e-12 * std::max(1.0, makespan);
  for (std::size_t pt = 0; pt < g.points; ++pt) {
    if (pt > 0) {  // count = the mixed-radix digits of pt
      for (std::size_t c = 0; c < nc; ++c) {
        if (++count[c] <= static_cast<int>(g.chains[c].tasks.size())) break;
        count[c] = 0;
      }
    }
    const double e = earliest[pt];
    if (e == kInf) continue;
    double level = 0;
    for (std::size_t c = 0; c < nc; c += 2) level += g.chains[c].act * (count[c] - count[c + 1]);
    for (std::size_t c = 0; c < nc; ++c) {
      const auto& ch = g.chains[c];
      const auto& w = g.win[c];
      const int k = count[c];
      if (k >= static_cast<int>(ch.tasks.size())) continue;
      const bool backward = c % 2 == 1;
      if (backward && k >= count[c - 1]) continue;  // B_j after F_j
      if (!backward && level + ch.act > x_tol) continue;
      const auto ki = static_cast<std::size_t>(k);
      const double end = std::max(e, w.release[ki]) + w.dur[ki];
      if (end > w.deadline[ki] + tol || end > makespan + tol) continue;
      const std::size_t nx = pt + g.stride[c];
      if (end < earliest[nx]) {
        earliest[nx] = end;
        from[nx] = static_cast<std::int8_t>(c);
      }
    }
  }
  return earliest[g.points - 1] < kInf;
}

// The device's order read back from `from`, last subtask first.
std::vector<std::int32_t> merge_of(const Grid& g, const std::vector<std::int8_t>& from) {
  std::vector<std::int32_t> seq;
  std::vector<int> count(g.chains.size());
  for (std::size_t c = 0; c < g.chains.size(); ++c) count[c] = static_cast<int>(g.chains[c].tasks.size());
  for (std::size_t pt = g.points - 1; pt != 0;) {
    const auto c = static_cast<std::size_t>(from[pt]);
    --count[c];
    seq.push_back(g.chains[c].tasks[static_cast<std::size_t>(count[c])]);
    pt -= g.stride[c];
  }
  std::reverse(seq.begin(), seq.end());
  return seq;
}

}  // namespace

DeviceChains device_chains(const Problem& p, int d) {
  DeviceChains g;
  for (int m = 0; m < static_cast<int>(p.spec.models.size()); ++m) {
    const int r = p.replica_on(m, d), s = p.stage_on(m, d);
    const int mb = p.spec.models[static_cast<std::size_t>(m)].micro_batches;
    for (Kind k : {Kind::F, Kind::B}) {
      DeviceChains::Chain c;
      c.act = p.mem_delta[static_cast<std::size_t>(p.task_id(m, r, s, 0, Kind::F))];
      for (int j = 0; j < mb; ++j) c.tasks.push_back(p.task_id(m, r, s, j, k));
      g.chains.push_back(std::move(c));
    }
  }
  for (const auto& c : g.chains) {
    g.stride.push_back(g.points);
    g.points = saturating_product(g.points, c.tasks.size() + 1);
  }
  return g;
}

std::vector<double> device_levels(const DeviceChains& g, double limit) {
  std::vector<double> out{0.0};
  for (std::size_t c = 0; c < g.chains.size(); c += 2) {
    std::vector<double> next;
    for (double v : out) {
      for (std::size_t k = 0; k <= g.chains[c].tasks.size(); ++k) {
        const double w = v + static_cast<double>(k) * g.chains[c].act;
        if (w <= limit * (1 + 1e-12) + 1e-12) next.push_back(w);
      }
    }
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end(), same_time), next.end());
    out = std::move(next);
  }
  return out;
}

std::vector<double> latest_finish(const Problem& p, const Order& order, const Timing& t, double makespan) {
  const auto n = static_cast<std::size_t>(p.num_tasks);
  std::vector<std::int32_t> next(n, -1);
  for (int d = 0; d < p.devices; ++d) {
    for (int i = 0; i + 1 < p.per_device; ++i) {
      const auto k = static_cast<std::size_t>(d * p.per_device + i);
      next[static_cast<std::size_t>(order[k])] = order[k + 1];
    }
  }
  // Later starts first: every successor starts after its predecessor ends.
  std::vector<std::int32_t> by_start(n);
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](std::int32_t a, std::int32_t b) {
    return t.start[static_cast<std::size_t>(a)] > t.start[static_cast<std::size_t>(b)];
  });
  std::vector<double> lf(n, makespan);
  for (std::int32_t x : by_start) {
    const auto xi = static_cast<std::size_t>(x);
    double v = makespan;
    if (const std::int32_t y = next[xi]; y >= 0) v = std::min(v, lf[static_cast<std::size_t>(y)] - p.dur[static_cast<std::size_t>(y)]);
    if (const std::int32_t s = p.succ[xi]; s >= 0) {
      const auto si = static_cast<std::size_t>(s);
      v = std::min(v, lf[si] - p.dur[si] - p.lag[si]);
    }
    lf[xi] = v;
  }
  return lf;
}

std::optional<DeviceSequence> lowest_peak_sequence(const Problem& p, const std::vector<double>& end,
                                                   const std::vector<double>& lf, int d, double makespan, double cap,
                                                   std::size_t max_states, const std::function<bool()>& stop,
                                                   Pick pick) {
  // Every device's grid has grid_points(p) points: a device left alone is told so
  // before its windows are gathered.
  if (grid_points(p) > max_states) return std::nullopt;
  const Grid g = grid_of(p, end, lf, d);
  if (g.chains.size() > 127) return std::nullopt;
  const std::vector<double> levels = device_levels(g, cap);
  if (levels.empty()) return std::nullopt;
  std::vector<double> earliest;
  std::vector<std::int8_t> from;
  if (pick == Pick::highest) {
    if ((stop && stop()) || !fits(g, levels.back(), makespan, earliest, from)) return std::nullopt;
    return DeviceSequence{levels.back(), merge_of(g, from)};
  }
  // The lowest level at which the whole grid fits. Mostly a device cannot come down
  // at all, so the level one step below the cap (its present peak) is tried first,
  // and only a device that can is searched further; `from` holds the program of
  // level `held` when it fitted.
  std::size_t lo = levels.size() - 1, held = levels.size();
  bool stopped = false;
  auto fits_at = [&](std::size_t i) {
    stopped = stopped || (stop && stop());
    const bool ok = !stopped && fits(g, levels[i], makespan, earliest, from);
    held = ok ? i : levels.size();
    return ok;
  };
  if (lo > 0 && fits_at(lo - 1)) {
    std::size_t hi = lo - 1;
    lo = 0;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (fits_at(mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
  }
  // The present order fits at its own peak, unless its times rest on a cycle
  // through other devices that the windows cut (then nothing is offered).
  if ((held != lo && !fits_at(lo)) || stopped) return std::nullopt;
  return DeviceSequence{levels[lo], merge_of(g, from)};
}

std::size_t grid_points(const Problem& p) {
  std::size_t points = 1;
  for (const ModelSpec& m : p.spec.models) {
    const auto len = static_cast<std::size_t>(m.micro_batches) + 1;
    points = saturating_product(points, len);
    points = saturating_product(points, len);  // its forwards and its backwards
  }
  return points;
}

double resequence_reserve(const Problem& p, double seconds) {
  const std::size_t points = grid_points(p);
  if (seconds <= 0 || points > kResequencePeakStates) return 0.0;
  return std::min(0.1 * seconds, 1e-7 * static_cast<double>(points));
}

ResequenceStats resequence_devices(const Problem& p, Order& order, const ResequenceOptions& opt) {
  ResequenceStats st;
  if (p.per_device < 2) return st;
  Timing t = evaluate(p, order);
  if (!t.valid) return st;
  const double makespan = t.makespan;
  // Device d in `seq`'s order when its exact timing keeps the makespan.
  auto keep = [&](int d, const DeviceSequence& seq) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(d) * static_cast<std::size_t>(p.per_device));
    if (std::equal(seq.order.begin(), seq.order.end(), first)) return false;
    Order trial = order;
    std::copy(seq.order.begin(), seq.order.end(), trial.begin() + (first - order.begin()));
    Timing tt = evaluate(p, trial);
    if (!tt.valid || tt.makespan > makespan * (1 + 1e-12)) {  // the memory pass's wall
      ++st.refused;
      return false;
    }
    order = std::move(trial);
    t = std::move(tt);
    ++st.kept;
    return true;
  };
  // The devices at the highest peak go first, so that a sweep the deadline cuts has
  // done them, and only they may have grids up to opt.peak_states.
  std::vector<int> devices(static_cast<std::size_t>(p.devices));
  // The windows change only with the order: counted again after a kept one.
  std::vector<double> lf = latest_finish(p, order, t, makespan);
  for (int round = 0; round < opt.rounds; ++round) {
    std::iota(devices.begin(), devices.end(), 0);
    std::stable_sort(devices.begin(), devices.end(), [&](int a, int b) {
      return t.device_peak[static_cast<std::size_t>(a)] > t.device_peak[static_cast<std::size_t>(b)];
    });
    bool lowered = false;
    for (const int d : devices) {
      if (opt.stop && opt.stop()) return st;
      const auto du = static_cast<std::size_t>(d);
      const double present = t.device_peak[du];
      const std::size_t limit = same_time(present, t.peak_memory) ? std::max(opt.max_states, opt.peak_states) : opt.max_states;
      const auto seq = lowest_peak_sequence(p, t.end, lf, d, makespan, present, limit, opt.stop);
      if (!seq) {
        ++st.skipped;
        continue;
      }
      ++st.tried;
      bool kept = keep(d, *seq);
      if (!kept && seq->peak < just_below(present)) {
        // The lowest merge came back late through a cycle; the one just below the
        // present peak, nearer to the present order, may not.
        const auto near = lowest_peak_sequence(p, t.end, lf, d, makespan, just_below(present), limit, opt.stop, Pick::highest);
        kept = near && keep(d, *near);
      }
      if (!kept) continue;
      lf = latest_finish(p, order, t, makespan);
      if (t.device_peak[du] < present && !same_time(t.device_peak[du], present)) {
        ++st.lowered;
        lowered = true;
      }
    }
    if (!lowered) break;
  }
  return st;
}

}  // namespace braid::sched
