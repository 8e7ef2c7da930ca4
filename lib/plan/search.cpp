#include "plan/search.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/rng.hpp"

namespace braid::plan {
namespace {

using Clock = std::chrono::steady_clock;

// A placement: for each role, a mesh (first device, devices); calls of the role use it.
struct Placement {
  std::string name;
  std::vector<std::pair<std::string, Mesh>> role_mesh;
};

std::vector<Placement> hybridflow_placements(int devices) {
  const Mesh all{0, devices};
  std::vector<Placement> out;
  out.push_back({"colocate", {{"actor", all}, {"critic", all}, {"ref", all}, {"reward", all}}});
  if (devices >= 2) {
    const Mesh a{0, devices / 2}, b{devices / 2, devices / 2};
    out.push_back({"split", {{"actor", a}, {"ref", a}, {"critic", b}, {"reward", b}}});
  }
  if (devices >= 8) {
    const int h = devices / 2, q = devices / 4, e = devices / 8;
    out.push_back({"standalone", {{"actor", {0, h}}, {"critic", {h, q}}, {"ref", {h + q, e}}, {"reward", {h + q + e, e}}}});
  }
  return out;
}

class Searcher {
 public:
  explicit Searcher(const PlanSpace& s) : space_(s) {}

  double cost(const Plan& p) {
    ++evaluated_;
    return space_.evaluate(p).cost;
  }

  // Every starting point; returns the cheapest, and its name.
  std::pair<Plan, std::string> start() {
    const int nc = static_cast<int>(space_.calls().size());
    std::vector<std::pair<Plan, std::string>> starts;
    // ReaL: every call at its fastest option, wherever that is.
    Plan greedy(static_cast<std::size_t>(nc));
    for (int c = 0; c < nc; ++c) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& o : space_.options(c)) {
        const double t = space_.entries(c, o.mesh)[static_cast<std::size_t>(o.entry)].estimate.time;
        if (t < best) {
          best = t;
          greedy[static_cast<std::size_t>(c)] = o;
        }
      }
    }
    starts.push_back({greedy, "fastest-per-call"});
    for (const auto& pl : hybridflow_placements(space_.cost_model().cluster().devices())) {
      Plan p(static_cast<std::size_t>(nc));
      bool ok = true;
      for (int c = 0; c < nc && ok; ++c) {
        ok = false;
        for (const auto& [role, m] : pl.role_mesh) {
          if (role != space_.calls()[static_cast<std::size_t>(c)].role) continue;
          const int mi = space_.mesh_index(m);
          const int e = mi < 0 ? -1 : fastest_entry(space_, c, mi);
          if (e >= 0) {
            p[static_cast<std::size_t>(c)] = {mi, e};
            ok = true;
          }
        }
      }
      if (ok) starts.push_back({p, pl.name});
    }
    std::size_t best = 0;
    double best_cost = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const double c = cost(starts[i].first);
      if (c < best_cost) {
        best_cost = c;
        best = i;
      }
    }
    return starts[best];
  }

  // A random neighbour: one call moves, to another entry on its mesh, to
  // another mesh of the same size, or anywhere.
  Plan neighbour(const Plan& p, Rng& rng) {
    Plan q = p;
    const int nc = static_cast<int>(p.size());
    const int c = static_cast<int>(rng.below(static_cast<std::uint64_t>(nc)));
    Choice& ch = q[static_cast<std::size_t>(c)];
    switch (rng.below(3)) {
      case 0: {
        const auto& es = space_.entries(c, ch.mesh);
        ch.entry = static_cast<int>(rng.below(es.size()));
        break;
      }
      case 1: {
        const auto& same = space_.meshes_of_size(space_.meshes()[static_cast<std::size_t>(ch.mesh)].count);
        ch.mesh = same[rng.below(same.size())];
        break;
      }
      default: {
        const auto& opts = space_.options(c);
        ch = opts[rng.below(opts.size())];
      }
    }
    return q;
  }

  // Tries every option of each call in turn, keeping improvements, until a full round finds none.
  void descend(Plan& p, double& c, Clock::time_point deadline) {
    bool improved = true;
    while (improved && Clock::now() < deadline) {
      improved = false;
      for (std::size_t call = 0; call < p.size(); ++call) {
        for (const auto& o : space_.options(static_cast<int>(call))) {
          if (o == p[call]) continue;
          Plan q = p;
          q[call] = o;
          const double cq = cost(q);
          if (cq < c * (1 - 1e-12)) {
            p = std::move(q);
            c = cq;
            improved = true;
          }
        }
      }
    }
  }

  long evaluated() const { return evaluated_; }

 private:
  const PlanSpace& space_;
  long evaluated_ = 0;
};

}  // namespace

int fastest_entry(const PlanSpace& space, int call, int mesh) {
  const auto& es = space.entries(call, mesh);
  int best = -1;
  for (std::size_t i = 0; i < es.size(); ++i) {
    if (best < 0 || es[i].estimate.time < es[static_cast<std::size_t>(best)].estimate.time) best = static_cast<int>(i);
  }
  return best;
}

SearchResult exhaustive_search(const PlanSpace& space, bool progress) {
  const auto t0 = Clock::now();
  const std::size_t nc = space.calls().size();
  for (std::size_t c = 0; c < nc; ++c) {
    if (space.options(static_cast<int>(c)).empty()) {
      throw InputError("experiment", space.calls()[c].name, "has no valid mesh and strategy on this cluster");
    }
  }
  SearchResult r;
  r.method = "exhaustive";
  std::vector<std::size_t> idx(nc, 0);
  Plan p(nc);
  double best = std::numeric_limits<double>::infinity();
  const double total = space.plan_count();
  std::optional<Progress> bar;
  if (progress) bar.emplace("enumerating plans", static_cast<std::uint64_t>(total), "plans");
  while (true) {
    for (std::size_t c = 0; c < nc; ++c) p[c] = space.options(static_cast<int>(c))[idx[c]];
    const double cost = space.evaluate(p).cost;
    ++r.evaluated;
    if (cost < best) {
      best = cost;
      r.plan = p;
    }
    if (bar && r.evaluated % 4096 == 0) bar->set(static_cast<std::uint64_t>(r.evaluated));
    std::size_t c = 0;
    while (c < nc && ++idx[c] == space.options(static_cast<int>(c)).size()) idx[c++] = 0;
    if (c == nc) break;
  }
  if (bar) bar->finish();
  r.eval = space.evaluate(r.plan);
  r.seconds = seconds_since(t0);
  return r;
}

SearchResult search_plan(const PlanSpace& space, const SearchOptions& opt) {
  const double count = space.plan_count();
  if (opt.method == "exhaustive" || (opt.method == "auto" && count <= opt.exhaustive_limit)) {
    if (count > 5e8) {
      throw UsageError(fmt::format("the plan space has {:.3g} plans, too many to enumerate; use --search mh", count));
    }
    return exhaustive_search(space, opt.progress);
  }
  for (std::size_t c = 0; c < space.calls().size(); ++c) {
    if (space.options(static_cast<int>(c)).empty()) {
      throw InputError("experiment", space.calls()[c].name, "has no valid mesh and strategy on this cluster");
    }
  }
  const auto t0 = Clock::now();
  // Three quarters of the time for the chain, the rest for the final descent.
  auto after = [&](double sec) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sec));
  };
  const auto deadline = after(0.75 * opt.time_limit_s), end = after(opt.time_limit_s);
  Searcher s(space);
  SearchResult r;
  r.method = "mh";
  auto [cur, start_name] = s.start();
  r.start = start_name;
  double c_cur = s.cost(cur);
  Plan best = cur;
  double c_best = c_cur;
  const double scale = c_cur;
  // Inverse temperature relative to the starting cost, raised geometrically:
  // early on a 10% worse plan is often accepted, at the end almost never.
  const double beta0 = 10, beta1 = 2000;
  Rng rng(opt.seed, 0);
  std::optional<Progress> bar;
  if (opt.progress) bar.emplace("searching plans", static_cast<std::uint64_t>(opt.max_iterations), "plans");
  long k = 0;
  for (; k < opt.max_iterations; ++k) {
    if ((k & 255) == 0) {
      if (Clock::now() > deadline) break;
      if (bar) {
        bar->set(static_cast<std::uint64_t>(k));
        bar->set_status(fmt::format("best {:.1f} s", c_best));
      }
    }
    const double beta = beta0 * std::pow(beta1 / beta0, static_cast<double>(k) / opt.max_iterations);
    Plan q = s.neighbour(cur, rng);
    const double c_q = s.cost(q);
    if (c_q <= c_cur || rng.uniform() < std::exp(-beta * (c_q - c_cur) / scale)) {
      cur = std::move(q);
      c_cur = c_q;
      if (c_cur < c_best) {
        best = cur;
        c_best = c_cur;
      }
    }
  }
  if (bar) {
    bar->set(static_cast<std::uint64_t>(k));
    bar->finish();
  }
  s.descend(best, c_best, end);
  r.plan = best;
  r.eval = space.evaluate(best);
  r.evaluated = s.evaluated();
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace braid::plan
