// The lower bound is never above a schedule that exists.
#include <boost/test/unit_test.hpp>

#include "core/rng.hpp"
#include "helpers.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/timeline.hpp"

using namespace braid::sched;

BOOST_AUTO_TEST_CASE(bound_is_below_every_schedule_met_on_a_random_walk) {
  for (int variant = 0; variant < 3; ++variant) {
    SchedSpec s = testing::two_models(8, 8, variant == 2 ? 1 : 2, 5.0, variant == 1 ? 2.0 : 4.0);
    s.p2p_time = variant * 0.5;
    const Problem p = build_problem(s);
    const double bound = lower_bound(p).value;
    Timeline tl(p, one_f_one_b(p));
    braid::Rng rng(static_cast<std::uint64_t>(variant));
    double lowest = tl.makespan();
    for (int k = 0; k < 50000; ++k) {
      const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
      const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.per_device - 1)));
      if (tl.swap(d, i, tl.makespan() + 3.0) == SwapResult::done) lowest = std::min(lowest, tl.makespan());
    }
    BOOST_CHECK_LE(bound, lowest + 1e-9);
    AnnealOptions o;
    o.iterations = 100000;
    o.time_limit = 0;
    o.mem_iterations = 20000;
    const AnnealResult r = anneal(p, *greedy(p), bound, o);
    BOOST_CHECK_LE(bound, r.makespan + 1e-9);
    BOOST_CHECK_LE(bound, evaluate(p, *greedy(p)).makespan + 1e-9);
    // With memory in the energy the result is still a valid schedule, and the
    // memory pass never raises the makespan it started from.
    o.mem_weight = 0.3;
    const AnnealResult rm = anneal(p, *greedy(p), bound, o);
    const Timing tm = evaluate(p, rm.order);
    BOOST_REQUIRE(tm.valid);
    BOOST_CHECK_LE(bound, tm.makespan + 1e-9);
    BOOST_CHECK_LE(tm.makespan, evaluate(p, *greedy(p)).makespan + 1e-9);
  }
}

BOOST_AUTO_TEST_CASE(bound_of_one_model_is_its_1f1b_time) {
  // A single pipeline with uniform stages: 1F1B is optimal and the bound says so.
  SchedSpec s = testing::two_models(4, 6, 2, 5.0, 4.0);
  s.models.pop_back();
  const Problem p = build_problem(s);
  BOOST_CHECK_CLOSE(lower_bound(p).value, (6 + 4 - 1) * 15.0, 1e-9);
  BOOST_CHECK_CLOSE(evaluate(p, one_f_one_b(p)).makespan, (6 + 4 - 1) * 15.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(annealing_reaches_the_bound_on_the_issue_example) {
  const Problem p = build_problem(testing::two_models(8, 16, 2, 5.0, 4.0, 1.95, 2.0));
  const double bound = lower_bound(p).value;
  AnnealOptions o;
  o.iterations = 2'000'000;
  o.time_limit = 0;
  o.mem_iterations = 100000;
  const AnnealResult r = anneal(p, *greedy(p), bound, o);
  BOOST_CHECK(same_time(r.makespan, bound));
  BOOST_CHECK(r.stats.reached_bound);
}

BOOST_AUTO_TEST_CASE(memory_pass_lowers_the_peak_without_raising_the_makespan) {
  const Problem p = build_problem(testing::two_models(8, 16, 2, 5.0, 4.0, 1.95, 2.0));
  const Order start = *greedy(p);
  const Timing before = evaluate(p, start);
  const double serial_peak = serial_1f1b(p.spec).peak_memory;
  const Order lowered = lower_memory(p, start, 300000, 0, serial_peak, 1, 0);
  const Timing after = evaluate(p, lowered);
  BOOST_REQUIRE(after.valid);
  BOOST_CHECK_LE(after.makespan, before.makespan * (1 + 1e-12));
  BOOST_CHECK_LT(after.peak_memory, before.peak_memory);
  BOOST_TEST_MESSAGE("peak " << before.peak_memory << " -> " << after.peak_memory << " (serial 1F1B " << serial_peak << ")");
}
