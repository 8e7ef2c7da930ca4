#include "sched/exact.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/log.hpp"
#include "sched/resequence.hpp"

namespace braid::sched {

namespace {

// Every 16th node asks opt.stop.
constexpr std::uint64_t kStopEvery = 16;
// A device program keeps a point's chain counts a byte each in one word.
constexpr std::size_t kMaxChains = 8;
constexpr std::size_t kMaxChainLength = 255;

// Whether a program can hold a point of device grid g: its counts a byte a chain in one
// word, its index in 32 bits.
bool fits_a_word(const DeviceChains& g) {
  if (g.chains.size() > kMaxChains || g.points > std::numeric_limits<std::uint32_t>::max()) return false;
  return std::all_of(g.chains.begin(), g.chains.end(),
                     [](const DeviceChains::Chain& c) { return c.tasks.size() <= kMaxChainLength; });
}

// One device's chains (resequence.hpp) as a program reads them, and a point of its
// grid as a word of counts, a byte a chain.
struct Lanes {
  std::size_t n;  // chains
  const std::int32_t* tasks[kMaxChains];
  int len[kMaxChains];
  double act[kMaxChains];
  std::size_t stride[kMaxChains];
  std::size_t points;

  explicit Lanes(const DeviceChains& g) : n(g.chains.size()), points(g.points) {
    for (std::size_t c = 0; c < n; ++c) {
      tasks[c] = g.chains[c].tasks.data();
      len[c] = static_cast<int>(g.chains[c].tasks.size());
      act[c] = g.chains[c].act;
      stride[c] = g.stride[c];
    }
  }
  static int count(std::uint64_t pk, std::size_t c) { return static_cast<int>((pk >> (8 * c)) & 0xff); }
  static std::uint64_t one_more(std::uint64_t pk, std::size_t c) { return pk + (std::uint64_t{1} << (8 * c)); }
  std::size_t point(std::uint64_t pk) const {
    std::size_t pt = 0;
    for (std::size_t c = 0; c < n; ++c) pt += static_cast<std::size_t>(count(pk, c)) * stride[c];
    return pt;
  }
  // The activations held at counts pk: each model's forwards less its backwards.
  double level(std::uint64_t pk) const {
    double l = 0;
    for (std::size_t m = 0; m < n; m += 2) l += act[m] * (count(pk, m) - count(pk, m + 1));
    return l;
  }
  // The subtask chain c runs next at counts pk and level lv (its forward within
  // `limit`, a backward after its forward), or -1.
  int next(std::uint64_t pk, double lv, std::size_t c, double limit) const {
    const int k = count(pk, c);
    if (k >= len[c]) return -1;
    if (c % 2 == 1) {
      if (k >= count(pk, c - 1)) return -1;
    } else if (lv + act[c] > limit) {
      return -1;
    }
    return tasks[c][k];
  }
};

// A node of the search: the windows, and every device's order so far (its prefix,
// the chain counts it has reached, and the earliest end of its last subtask).
struct Node {
  std::vector<double> es, le;  // earliest start, latest end
  std::vector<std::uint64_t> count;  // a device's chain counts (Lanes)
  std::vector<std::vector<std::int32_t>> prefix;
  std::vector<double> ready;
  // Per device, from its last program: for each chain, the latest time the point
  // reached by running the chain's next subtask may have (-inf: not reachable), and
  // whether the device's windows are still those the program left (then a decision
  // on it reads these instead of running the program again).
  std::vector<std::vector<double>> next_lat;
  std::vector<char> fresh;
};

class Search {
 public:
  Search(const Problem& p, double makespan, double level, const ExactOptions& opt, ExactStats& stats)
      : p_(p), makespan_(makespan), level_(level * (1 + 1e-9) + 1e-9), tol_(1e-9 * std::max(1.0, makespan)),
        opt_(opt), stats_(stats) {
    for (int d = 0; d < p.devices; ++d) {
      devices_.push_back(device_chains(p, d));
      if (!fits_a_word(devices_.back())) {
        throw std::invalid_argument("order_within: a device has more chains or longer ones than a program holds");
      }
    }
    for (const auto& g : devices_) lanes_.emplace_back(g);
    std::size_t most = 0;
    for (const auto& g : devices_) most = std::max(most, g.points);
    grid_.assign(most, Cell{});
    for (const auto& g : devices_) live_.emplace_back((g.points + 63) / 64, ~std::uint64_t{0});
    new_es_.resize(static_cast<std::size_t>(p.num_tasks));
    new_le_.resize(static_cast<std::size_t>(p.num_tasks));
    if (opt.guide != nullptr) {
      guide_pos_.assign(static_cast<std::size_t>(p.num_tasks), 0);
      for (std::size_t k = 0; k < opt.guide->size(); ++k) {
        guide_pos_[static_cast<std::size_t>((*opt.guide)[k])] = static_cast<int>(k % static_cast<std::size_t>(p.per_device));
      }
    }
  }

  std::optional<Order> run() {
    Node root;
    root.es.assign(static_cast<std::size_t>(p_.num_tasks), 0.0);
    root.le.assign(static_cast<std::size_t>(p_.num_tasks), makespan_);
    root.ready.assign(static_cast<std::size_t>(p_.devices), 0.0);
    for (const auto& g : devices_) {
      root.count.push_back(0);
      root.prefix.emplace_back();
      root.next_lat.emplace_back(g.chains.size(), -kInf);
    }
    root.fresh.assign(static_cast<std::size_t>(p_.devices), 0);
    for (std::uint64_t descent = 0;; ++descent) {
      const std::uint64_t restart = opt_.first_descent + descent;
      rng_.seed(opt_.seed * 0x9e3779b97f4a7c15ULL + restart);
      noise_ = restart == 0 ? 0.0 : 0.01 * makespan_;
      restart_nodes_ = 0;
      deepest_ = 0;
      if (dfs(root, -1, 0)) return solution_;
      if (stopped_ || refuted_ || out_of_nodes() || opt_.restart_nodes == 0) return std::nullopt;
      if (opt_.descents > 0 && descent + 1 >= opt_.descents) return std::nullopt;
    }
  }

 private:
  bool out_of_nodes() const { return opt_.nodes > 0 && stats_.nodes >= opt_.nodes; }
  // A descent restarts once opt.restart_nodes of its nodes went no deeper than its
  // deepest decision (a node either goes one decision deeper or goes back).
  bool restart_due() const { return opt_.restart_nodes > 0 && restart_nodes_ - deepest_ > opt_.restart_nodes; }

  // Device d's windows tightened by the program over its grid from its prefix on;
  // ears_/lats_ hold, for every point reached (pts_; grid_ stamped gen_ points to its
  // place there), the earliest time its subtasks can all have run and the latest they
  // may, for the rest to fit. Points found dead on the way to this node are skipped,
  // and the points found dead now are marked so (live_).
  bool tighten(Node& s, int d) {
    const Lanes& g = lanes_[static_cast<std::size_t>(d)];
    const std::uint64_t lo = s.count[static_cast<std::size_t>(d)];
    ++gen_;
    const std::size_t start = g.point(lo);
    if (!live(d, start)) return false;
    grid_[start] = {gen_, 0};
    const double* es = s.es.data();
    const double* le = s.le.data();
    const double* dur = p_.dur.data();
    // The points the windows let the device reach (grid_ stamped gen_), layer by layer
    // (a layer: the points with as many subtasks run), each with its chain counts and
    // its level.
    pts_.assign(1, start);
    ears_.assign(1, s.ready[static_cast<std::size_t>(d)]);
    lats_.assign(1, -kInf);
    packs_.assign(1, lo);
    levels_.assign(1, g.level(lo));
    // moves_[i]: the chains whose next subtask point i can run within its window (a
    // bit each), the only transitions the backward pass looks at.
    moves_.assign(1, 0);
    for (std::size_t i = 0; i < pts_.size(); ++i) {
      const std::size_t pt = pts_[i];
      const std::uint64_t pk = packs_[i];
      const double lv = levels_[i];
      const double e0 = ears_[i];
      std::uint8_t moves = 0;
      for (std::size_t c = 0; c < g.n; ++c) {
        const int x = g.next(pk, lv, c, level_);
        if (x < 0) continue;
        const auto xi = static_cast<std::size_t>(x);
        const double end = std::max(e0, es[xi]) + dur[xi];
        if (end > le[xi] + tol_) continue;
        const std::size_t nx = pt + g.stride[c];
        if (!live(d, nx)) continue;
        moves |= static_cast<std::uint8_t>(1U << c);
        Cell& cell = grid_[nx];
        if (cell.stamp != gen_) {
          cell = {gen_, static_cast<std::uint32_t>(pts_.size())};
          pts_.push_back(nx);
          ears_.push_back(end);
          lats_.push_back(-kInf);
          const std::uint64_t npk = Lanes::one_more(pk, c);
          packs_.push_back(npk);
          levels_.push_back(g.level(npk));
          moves_.push_back(0);
        } else {
          ears_[cell.index] = std::min(ears_[cell.index], end);
        }
      }
      moves_[i] = moves;
    }
    const std::size_t last = g.points - 1;
    if (grid_[last].stamp != gen_) return false;
    // Backwards: the latest time each point's subtasks may all have run for the rest
    // to fit, and each subtask's window from the transitions that some path through
    // the grid meeting every window takes (a transition out of a point is on such a
    // path exactly when it fits between the point's earliest time and the next
    // point's latest).
    for (std::size_t c = 0; c < g.n; ++c) {
      for (int k = Lanes::count(lo, c); k < g.len[c]; ++k) {
        const auto xi = static_cast<std::size_t>(g.tasks[c][k]);
        new_es_[xi] = kInf;
        new_le_[xi] = -kInf;
      }
    }
    lats_[grid_[last].index] = makespan_;
    for (std::size_t i = pts_.size(); i-- > 0;) {
      const std::size_t pt = pts_[i];
      if (pt == last) continue;
      const std::uint64_t pk = packs_[i];
      const double e0 = ears_[i];
      double best = -kInf;
      for (unsigned moves = moves_[i]; moves != 0; moves &= moves - 1) {
        const auto c = static_cast<std::size_t>(std::countr_zero(moves));
        const auto xi = static_cast<std::size_t>(g.tasks[c][Lanes::count(pk, c)]);
        const double lat = lats_[grid_[pt + g.stride[c]].index];
        if (lat == -kInf) continue;
        const double st = std::max(es[xi], e0);
        const double hi = std::min(lat, le[xi]);
        if (st + dur[xi] > hi + tol_) continue;
        best = std::max(best, hi - dur[xi]);
        new_es_[xi] = std::min(new_es_[xi], st);
        new_le_[xi] = std::max(new_le_[xi], hi);
      }
      lats_[i] = best;
    }
    // A point from which the rest cannot fit stays so below this node: its windows only
    // close further (later earliest starts, earlier latest ends, a longer prefix).
    for (std::size_t i = 0; i < pts_.size(); ++i) {
      if (lats_[i] == -kInf) kill(d, pts_[i]);
    }
    if (lats_[0] == -kInf) return false;
    for (std::size_t c = 0; c < g.n; ++c) {
      for (int k = Lanes::count(lo, c); k < g.len[c]; ++k) {
        const auto xi = static_cast<std::size_t>(g.tasks[c][k]);
        if (new_es_[xi] == kInf) return false;
        s.es[xi] = std::max(s.es[xi], new_es_[xi]);
        s.le[xi] = std::min(s.le[xi], new_le_[xi]);
      }
    }
    // The prefix: its times forwards from the earliest starts, its latest ends
    // backwards from the latest time the rest allows it to end.
    auto& prefix = s.prefix[static_cast<std::size_t>(d)];
    double t = 0;
    for (std::int32_t x : prefix) {
      const auto xi = static_cast<std::size_t>(x);
      s.es[xi] = std::max(t, s.es[xi]);
      t = s.es[xi] + p_.dur[xi];
    }
    s.ready[static_cast<std::size_t>(d)] = t;
    double l = lats_[0];
    for (auto it = prefix.rbegin(); it != prefix.rend(); ++it) {
      const auto xi = static_cast<std::size_t>(*it);
      s.le[xi] = std::min(s.le[xi], l);
      l = s.le[xi] - p_.dur[xi];
      if (l + tol_ < s.es[xi]) return false;
    }
    // The candidates of a decision here: the transitions out of the start point.
    auto& next = s.next_lat[static_cast<std::size_t>(d)];
    for (std::size_t c = 0; c < g.n; ++c) {
      next[c] = (moves_[0] >> c) & 1U ? lats_[grid_[start + g.stride[c]].index] : -kInf;
    }
    s.fresh[static_cast<std::size_t>(d)] = 1;
    return true;
  }

  // The windows along every data chain (a successor starts after its predecessor
  // ends and its input arrives).
  void along_data(Node& s) const {
    for (int t = 0; t < p_.num_tasks; ++t) {
      if (p_.pred[static_cast<std::size_t>(t)] >= 0) continue;
      int last = t;
      for (int u = t; p_.succ[static_cast<std::size_t>(u)] >= 0; u = p_.succ[static_cast<std::size_t>(u)]) {
        const auto ui = static_cast<std::size_t>(u);
        const auto n = static_cast<std::size_t>(p_.succ[ui]);
        s.es[n] = std::max(s.es[n], s.es[ui] + p_.dur[ui] + p_.lag[n]);
        last = static_cast<int>(n);
      }
      for (int u = last; p_.pred[static_cast<std::size_t>(u)] >= 0; u = p_.pred[static_cast<std::size_t>(u)]) {
        const auto ui = static_cast<std::size_t>(u);
        const auto q = static_cast<std::size_t>(p_.pred[ui]);
        s.le[q] = std::min(s.le[q], s.le[ui] - p_.dur[ui] - p_.lag[ui]);
      }
    }
  }

  // Devices tightened until no window moves, starting from `first` (all: -1).
  bool propagate(Node& s, int first) {
    const auto n = static_cast<std::size_t>(p_.num_tasks);
    std::vector<char> dirty(static_cast<std::size_t>(p_.devices), first < 0 ? 1 : 0);
    if (first >= 0) dirty[static_cast<std::size_t>(first)] = 1;
    // The windows as the decision left them: what it moves along the data chains
    // marks the devices it reaches.
    std::vector<double> es0 = s.es, le0 = s.le;
    int d = -1;  // the device just tightened
    for (;;) {
      along_data(s);
      for (std::size_t x = 0; x < n; ++x) {
        if (s.es[x] + p_.dur[x] > s.le[x] + tol_) return false;
        // Windows creep by less than this through cycles of devices: not followed.
        if (s.es[x] != es0[x] || s.le[x] != le0[x]) s.fresh[static_cast<std::size_t>(p_.device[x])] = 0;
        if (s.es[x] > es0[x] + tol_ || s.le[x] < le0[x] - tol_) {
          if (p_.device[x] != d) dirty[static_cast<std::size_t>(p_.device[x])] = 1;
          es0[x] = s.es[x];
          le0[x] = s.le[x];
        }
      }
      // The next device marked after the one just tightened, round the devices: a
      // sweep along the pipelines, which a change follows (lowest index first took
      // 1.2–1.7x as many programs to the same windows).
      int next = -1;
      for (int k = 1; k <= p_.devices && next < 0; ++k) {
        const int e = (d + k + p_.devices) % p_.devices;
        if (dirty[static_cast<std::size_t>(e)]) next = e;
      }
      if (next < 0) return true;
      d = next;
      dirty[static_cast<std::size_t>(d)] = 0;
      if (!tighten(s, d)) return false;
      // What the program itself moved on its device is its result, not a change since.
      for (const auto& chain : devices_[static_cast<std::size_t>(d)].chains) {
        for (std::int32_t x : chain.tasks) {
          es0[static_cast<std::size_t>(x)] = s.es[static_cast<std::size_t>(x)];
          le0[static_cast<std::size_t>(x)] = s.le[static_cast<std::size_t>(x)];
        }
      }
    }
  }

  bool dfs(Node s, int decided, std::uint64_t depth) {
    // What this node finds dead is alive again for its siblings.
    const std::size_t mark = trail_.size();
    if (explore(std::move(s), decided, depth)) return true;
    for (std::size_t k = trail_.size(); k-- > mark;) {
      const auto [e, pt] = trail_[k];
      live_[e][pt >> 6] |= std::uint64_t{1} << (pt & 63);
    }
    trail_.resize(mark);
    return false;
  }

  bool explore(Node s, int decided, std::uint64_t depth) {
    ++stats_.nodes;
    ++restart_nodes_;
    deepest_ = std::max(deepest_, depth);
    if (opt_.stop && stats_.nodes % kStopEvery == 0 && opt_.stop()) stopped_ = true;
    if (stopped_ || out_of_nodes() || restart_due()) return false;
    if (!propagate(s, decided)) {
      refuted_ = decided < 0;  // at the root: no schedule at all, whatever the restarts
      return false;
    }
    // The device whose next subtask can start earliest decides next.
    int d = -1;
    double first = kInf;
    for (int e = 0; e < p_.devices; ++e) {
      const Lanes& g = lanes_[static_cast<std::size_t>(e)];
      const std::uint64_t cnt = s.count[static_cast<std::size_t>(e)];
      for (std::size_t c = 0; c < g.n; ++c) {
        const int k = Lanes::count(cnt, c);
        if (k >= g.len[c]) continue;
        const double t = std::max(s.ready[static_cast<std::size_t>(e)], s.es[static_cast<std::size_t>(g.tasks[c][k])]);
        if (t < first) {
          first = t;
          d = e;
        }
      }
    }
    if (d < 0) {
      Order order;
      for (const auto& pre : s.prefix) order.insert(order.end(), pre.begin(), pre.end());
      solution_ = std::move(order);
      return true;
    }
    const Lanes& g = lanes_[static_cast<std::size_t>(d)];
    // A device whose windows have not moved since its program ran has its candidates'
    // latest times from it (a quarter of the programs, run again for nothing).
    if (!s.fresh[static_cast<std::size_t>(d)] && !tighten(s, d)) return false;
    const std::uint64_t cnt = s.count[static_cast<std::size_t>(d)];
    const auto& next_lat = s.next_lat[static_cast<std::size_t>(d)];
    const double level = g.level(cnt);
    const double ready = s.ready[static_cast<std::size_t>(d)];
    struct Candidate {
      double key, start;
      std::size_t chain;
    };
    std::vector<Candidate> cands;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (std::size_t c = 0; c < g.n; ++c) {
      const int x = g.next(cnt, level, c, level_);
      if (x < 0) continue;
      const auto xi = static_cast<std::size_t>(x);
      if (next_lat[c] == -kInf) continue;
      const double st = std::max(ready, s.es[xi]);
      if (st + p_.dur[xi] > std::min(next_lat[c], s.le[xi]) + tol_) continue;
      // The subtask that leaves the device the most room first: the latest it may end
      // for the rest of the device to fit, less its earliest end (the earliest start
      // first, as first written, failed every descent on real 8/4 GBS 16 within its
      // first hundred decisions). A backward first at the same room: it gives memory back.
      const double room = std::min(next_lat[c], s.le[xi]) - (st + p_.dur[xi]);
      const double key = !guide_pos_.empty() ? guide_pos_[xi]
                                             : -room + (c % 2 == 0 ? tol_ : 0.0) + (noise_ > 0 ? noise_ * unit(rng_) : 0.0);
      cands.push_back({key, st, c});
    }
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.key < b.key; });
    for (const Candidate& cd : cands) {
      Node n = s;
      std::uint64_t& counts = n.count[static_cast<std::size_t>(d)];
      const std::int32_t x = g.tasks[cd.chain][Lanes::count(counts, cd.chain)];
      n.prefix[static_cast<std::size_t>(d)].push_back(x);
      counts = Lanes::one_more(counts, cd.chain);
      n.es[static_cast<std::size_t>(x)] = cd.start;
      n.ready[static_cast<std::size_t>(d)] = cd.start + p_.dur[static_cast<std::size_t>(x)];
      if (dfs(std::move(n), d, depth + 1)) return true;
      if (stopped_ || out_of_nodes() || restart_due()) return false;
    }
    return false;
  }

  const Problem& p_;
  const double makespan_, level_, tol_;
  const ExactOptions& opt_;
  ExactStats& stats_;
  std::vector<DeviceChains> devices_;
  std::vector<Lanes> lanes_;  // pointing into devices_
  // The device grid's points: stamped with the program that reached them, and their
  // place among the points it reached (pts_ and the arrays beside it).
  struct Cell {
    std::uint32_t stamp = 0, index = 0;
  };
  std::vector<Cell> grid_;
  std::vector<int> guide_pos_;  // each subtask's place on its device in opt.guide
  std::vector<double> new_es_, new_le_;
  std::uint32_t gen_ = 0;
  // Per device, a bit per grid point: not yet found dead on the way to this node (a
  // program skips the dead ones), and the points found dead since the root, in order.
  std::vector<std::vector<std::uint64_t>> live_;
  std::vector<std::pair<int, std::uint32_t>> trail_;
  bool live(int d, std::size_t pt) const { return (live_[static_cast<std::size_t>(d)][pt >> 6] >> (pt & 63)) & 1U; }
  void kill(int d, std::size_t pt) {
    std::uint64_t& w = live_[static_cast<std::size_t>(d)][pt >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (pt & 63);
    if ((w & bit) == 0) return;
    w &= ~bit;
    trail_.push_back({d, static_cast<std::uint32_t>(pt)});
  }
  std::vector<std::size_t> pts_;
  std::vector<double> ears_, lats_;
  std::vector<std::uint64_t> packs_;
  std::vector<double> levels_;
  std::vector<std::uint8_t> moves_;
  std::mt19937_64 rng_;
  double noise_ = 0;
  std::uint64_t restart_nodes_ = 0, deepest_ = 0;
  bool stopped_ = false;
  bool refuted_ = false;
  Order solution_;
};

}  // namespace

bool exact_applies(const Problem& p, std::size_t max_states) {
  if (p.num_tasks > kExactTasks) return false;
  for (int d = 0; d < p.devices; ++d) {
    const DeviceChains g = device_chains(p, d);
    if (g.points > max_states || !fits_a_word(g)) return false;
  }
  return true;
}

std::optional<Order> order_within(const Problem& p, double makespan, double level, const ExactOptions& opt,
                                  ExactStats* stats) {
  ExactStats local;
  ExactStats& st = stats ? *stats : local;
  std::optional<Order> order = Search(p, makespan, level, opt, st).run();
  if (!order) return std::nullopt;
  // The search's windows are necessary conditions and its decisions whole orders, so
  // what it returns is a schedule; it is timed exactly all the same.
  const Timing t = evaluate(p, *order);
  if (!t.valid || !at_most(t.makespan, makespan) || !at_most(t.peak_memory, level)) return std::nullopt;
  return order;
}

std::vector<double> memory_levels(const Problem& p) {
  // Every device holds one stage of every model, so every device's chains have the
  // same lengths and activations (grid_points), and the same levels.
  return device_levels(device_chains(p, 0), kInf);
}

ExactStats lower_peak_exactly(const Problem& p, Order& order, double floor, const ExactOptions& opt) {
  ExactStats stats;
  Timing t = evaluate(p, order);
  if (!t.valid) return stats;
  // The levels below the present peak, not below the floor, ascending.
  std::vector<double> levels;
  for (double l : memory_levels(p)) {
    if ((l >= floor || same_time(l, floor)) && l < t.peak_memory && !same_time(l, t.peak_memory)) levels.push_back(l);
  }
  // Single descents (each gives a level up after kExactProbeSlack nodes that went no
  // deeper), in sweeps: the floor, then down from the level just below the present
  // peak, a level at a time, and two, four, ... levels below the last one found while
  // they are found. Which levels a descent finds does not follow the level (real 16/8
  // GBS 32: of the nineteen levels from the serial peak to 1.076x, one descent each
  // finds 1.0059x, 1.027x and 1.076x), so a level not found is no reason to skip those
  // below it. The first sweep's descents are unperturbed, each later sweep perturbs
  // them anew, until the budget, the clock or the levels end (without a budget or a
  // clock, after kExactSweeps sweeps). After a descent finds a level, the level just
  // below is tried by a descent led by the order it found (solution-guided search): a
  // schedule one level too high is often one level from the next (real 16/8 GBS 32:
  // 160 from 160.94 in one descent, where unled ones find it about once in forty).
  bool stopped = false;
  std::size_t below = levels.size();  // levels[below] and up are not below the peak
  // Every probe at the makespan the order came with (a found order's may differ in the
  // last bits, and the windows with it: the probes would depend on the order of finds).
  const double makespan = t.makespan;
  auto probe = [&](std::size_t i, std::uint64_t sweep, bool led) {
    ExactOptions o = opt;
    if (opt.nodes > 0) o.nodes = opt.nodes - stats.nodes;
    o.descents = 1;
    o.first_descent = led ? 0 : opt.first_descent + sweep;
    o.restart_nodes = std::min(opt.restart_nodes, kExactProbeSlack);
    if (led) o.guide = &order;  // read when the search starts, before `order` changes
    ExactStats st;
    ++stats.levels_tried;
    std::optional<Order> found = order_within(p, makespan, levels[i], o, &st);
    stats.nodes += st.nodes;
    stopped = opt.stop && opt.stop();
    log::debug("  exact search at level {:.6g} ({}): {}, {} nodes", levels[i],
               led ? "led by the order" : fmt::format("sweep {}", sweep), found ? "found" : "not found", st.nodes);
    if (!found) return false;
    ++stats.levels_found;
    order = std::move(*found);
    t = evaluate(p, order);
    below = static_cast<std::size_t>(
        std::lower_bound(levels.begin(), levels.end(), t.peak_memory * (1 - 1e-9) - 1e-9) - levels.begin());
    return true;
  };
  auto spent = [&] { return stopped || below == 0 || (opt.nodes > 0 && stats.nodes >= opt.nodes); };
  // After a descent finds a level, one led by its order at the level just below.
  auto led_down = [&] {
    if (!spent()) probe(below - 1, 0, true);
  };
  for (std::uint64_t sweep = 0; !spent(); ++sweep) {
    if (opt.nodes == 0 && !opt.stop && sweep >= kExactSweeps) break;
    if (probe(0, sweep, false) || spent()) break;  // the floor: nothing lower to look for
    std::size_t step = 1;
    for (std::size_t i = below - 1; i >= 1 && !spent();) {
      if (probe(i, sweep, false)) {
        led_down();
        step *= 2;
        i = below > step ? below - step : 1;
      } else {
        step = 1;
        --i;
      }
      i = std::min(i, below - 1);
    }
  }
  return stats;
}

}  // namespace braid::sched
