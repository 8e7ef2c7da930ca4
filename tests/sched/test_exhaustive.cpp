// Tiny problems small enough to try every order on every device (not only the
// ones the annealer's moves can reach): their optimum is known for certain,
// the lower bound must not exceed it, and the annealer must find it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <limits>

#include "helpers.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"

using namespace braid::sched;

namespace {

struct Optimum {
  double makespan = std::numeric_limits<double>::infinity();
  long valid = 0;
};

// Every permutation of every device's subtasks; keeps the best valid one
// within the memory cap.
Optimum exhaustive(const Problem& p) {
  std::vector<std::vector<std::int32_t>> perms(static_cast<std::size_t>(p.devices));
  std::vector<std::vector<std::vector<std::int32_t>>> choices(static_cast<std::size_t>(p.devices));
  for (int d = 0; d < p.devices; ++d) {
    std::vector<std::int32_t> tasks;
    for (int i = 0; i < p.per_device; ++i) tasks.push_back(d * p.per_device + i);
    std::sort(tasks.begin(), tasks.end());
    do {
      choices[static_cast<std::size_t>(d)].push_back(tasks);
    } while (std::next_permutation(tasks.begin(), tasks.end()));
  }
  Optimum best;
  const double cap = p.spec.mem_capacity.value_or(std::numeric_limits<double>::infinity());
  std::vector<std::size_t> pick(static_cast<std::size_t>(p.devices), 0);
  Order order(static_cast<std::size_t>(p.num_tasks));
  for (;;) {
    for (int d = 0; d < p.devices; ++d) {
      const auto& c = choices[static_cast<std::size_t>(d)][pick[static_cast<std::size_t>(d)]];
      std::copy(c.begin(), c.end(), order.begin() + static_cast<std::ptrdiff_t>(d) * p.per_device);
    }
    const Timing t = evaluate(p, order);
    if (t.valid && t.peak_memory <= cap + 1e-9) {
      ++best.valid;
      best.makespan = std::min(best.makespan, t.makespan);
    }
    int d = 0;
    while (d < p.devices && ++pick[static_cast<std::size_t>(d)] == choices[static_cast<std::size_t>(d)].size()) {
      pick[static_cast<std::size_t>(d)] = 0;
      ++d;
    }
    if (d == p.devices) break;
  }
  return best;
}

void anneal_finds_optimum(const SchedSpec& spec) {
  const Problem p = build_problem(spec);
  const Optimum opt = exhaustive(p);
  BOOST_REQUIRE_GT(opt.valid, 0);
  const LowerBound lb = lower_bound(p);
  BOOST_CHECK_LE(lb.value, opt.makespan + 1e-9);
  const Order start = greedy(p).value_or(one_f_one_b(p));
  double mean_dur = 0;
  for (double v : p.dur) mean_dur += v / p.num_tasks;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    AnnealOptions o;
    o.seed = seed;
    // Ten times the default start temperature: on these tiny problems (and most
    // under a memory cap) the way to the optimum leads through much worse
    // schedules; the default, tuned on Table 3, stays at 24.4 of 23.2 here.
    o.t0 = mean_dur;
    o.iterations = 200000;
    o.time_limit = 0;
    o.mem_iterations = 20000;
    const AnnealResult r = anneal(p, start, lb.value, o);
    BOOST_CHECK_MESSAGE(same_time(r.makespan, opt.makespan),
                        "seed " << seed << ": annealing " << r.makespan << ", optimum " << opt.makespan);
    if (spec.mem_capacity) BOOST_CHECK_LE(r.peak_memory, *spec.mem_capacity + 1e-9);
  }
  BOOST_TEST_MESSAGE("optimum " << opt.makespan << " over " << opt.valid << " valid schedules, bound " << lb.value);
}

// Actor over 2 devices, critic as 2 single-stage replicas: 6 subtasks a device.
SchedSpec tiny(double af, double ab, double cf, double cb) {
  SchedSpec s;
  s.devices = 2;
  ModelSpec a{.name = "actor", .stages = 2, .replicas = 1, .micro_batches = 2};
  a.fwd = {af, af * 1.5};
  a.bwd = {ab, ab * 0.8};
  a.act_mem = {2, 2};
  ModelSpec c{.name = "critic", .stages = 1, .replicas = 2, .micro_batches = 1, .forward = false};
  c.fwd = {cf};
  c.bwd = {cb};
  c.act_mem = {3};
  s.models = {a, c};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(optimum_of_a_tiny_fusion) { anneal_finds_optimum(tiny(2, 4, 3, 5)); }

BOOST_AUTO_TEST_CASE(optimum_with_p2p_time) {
  SchedSpec s = tiny(1, 3, 2, 2.5);
  s.p2p_time = 0.75;
  anneal_finds_optimum(s);
}

BOOST_AUTO_TEST_CASE(optimum_under_a_memory_cap) {
  SchedSpec s = tiny(2, 4, 3, 5);
  s.mem_capacity = 5.0;  // actor's two micro-batches and the critic's cannot all be held
  anneal_finds_optimum(s);
}

BOOST_AUTO_TEST_CASE(optimum_of_two_opposed_pipelines) {
  SchedSpec s;
  s.devices = 2;
  ModelSpec a{.name = "actor", .stages = 2, .replicas = 1, .micro_batches = 1};
  a.fwd = {2, 3};
  a.bwd = {4, 5};
  a.act_mem = {1, 1};
  ModelSpec c{.name = "critic", .stages = 2, .replicas = 1, .micro_batches = 1, .forward = false};
  c.fwd = {1, 2.5};
  c.bwd = {3, 2};
  c.act_mem = {1, 1};
  s.models = {a, c};
  anneal_finds_optimum(s);
}
