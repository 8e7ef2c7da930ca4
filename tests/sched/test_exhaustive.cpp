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
  Optimum best;
  const double cap = p.spec.mem_capacity.value_or(std::numeric_limits<double>::infinity());
  testing::for_every_order(p, [&](const Order& order) {
    const Timing t = evaluate(p, order);
    if (t.valid && t.peak_memory <= cap + 1e-9) {
      ++best.valid;
      best.makespan = std::min(best.makespan, t.makespan);
    }
  });
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

}  // namespace

BOOST_AUTO_TEST_CASE(optimum_of_a_tiny_fusion) { anneal_finds_optimum(testing::tiny(2, 4, 3, 5)); }

BOOST_AUTO_TEST_CASE(optimum_with_p2p_time) {
  SchedSpec s = testing::tiny(1, 3, 2, 2.5);
  s.p2p_time = 0.75;
  anneal_finds_optimum(s);
}

BOOST_AUTO_TEST_CASE(optimum_under_a_memory_cap) {
  SchedSpec s = testing::tiny(2, 4, 3, 5);
  s.mem_capacity = 5.0;  // actor's two micro-batches and the critic's cannot all be held
  anneal_finds_optimum(s);
}

BOOST_AUTO_TEST_CASE(optimum_of_two_opposed_pipelines) { anneal_finds_optimum(testing::two_opposed(1, 1.0)); }
