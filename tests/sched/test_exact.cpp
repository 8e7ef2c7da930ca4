// Orders searched exactly (sched/exact.hpp): on problems small enough to try every
// order of every device, the search without a budget finds a schedule at a level
// exactly when one exists; with a budget it never returns a worse schedule, keeps
// to its budget, and gives the same result for the same seed.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <limits>

#include "helpers.hpp"
#include "sched/bound.hpp"
#include "sched/exact.hpp"
#include "sched/resequence.hpp"

using namespace braid::sched;

namespace {

// (makespan, peak) of every valid schedule: every permutation on every device.
std::vector<std::pair<double, double>> every_schedule(const Problem& p) {
  std::vector<std::pair<double, double>> out;
  testing::for_every_order(p, [&](const Order& order) {
    if (const Timing t = evaluate(p, order); t.valid) out.emplace_back(t.makespan, t.peak_memory);
  });
  return out;
}

SchedSpec tiny_with_lag() {
  SchedSpec s = testing::tiny(1, 3, 2, 2.5);
  s.p2p_time = 0.75;
  return s;
}

// No budget, no restarts: the search is complete.
ExactOptions complete() {
  ExactOptions o;
  o.nodes = 0;
  o.restart_nodes = 0;
  return o;
}

// A latency search's schedule of p, stopped at its bound.
Order searched(const Problem& p, std::uint64_t iterations, std::uint64_t seed) {
  return testing::latency_searched(p, iterations, seed, lower_bound(p).value);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(exact)

BOOST_AUTO_TEST_CASE(without_a_budget_a_level_is_found_exactly_when_some_schedule_is_there) {
  for (const SchedSpec& spec : {testing::tiny(2, 4, 3, 5), tiny_with_lag(), testing::two_opposed(2, 1.5)}) {
    const Problem p = build_problem(spec);
    const auto all = every_schedule(p);
    BOOST_REQUIRE(!all.empty());
    double fastest = kInf;
    for (const auto& [m, peak] : all) fastest = std::min(fastest, m);
    const std::vector<double> levels = memory_levels(p);
    int found_below_the_top = 0;
    for (double makespan : {fastest, fastest * 1.15, fastest * 1.6}) {
      double lowest = kInf;  // the lowest peak of a schedule within the makespan
      for (const auto& [m, peak] : all) {
        if (at_most(m, makespan)) lowest = std::min(lowest, peak);
      }
      for (double level : levels) {
        ExactStats st;
        const std::optional<Order> o = order_within(p, makespan, level, complete(), &st);
        BOOST_CHECK_MESSAGE(o.has_value() == at_most(lowest, level),
                            "makespan " << makespan << " level " << level << ": lowest peak " << lowest << ", search "
                                        << (o ? "found" : "found nothing") << " in " << st.nodes << " nodes");
        if (o) {
          const Timing t = evaluate(p, *o);
          BOOST_CHECK(t.valid);
          BOOST_CHECK(at_most(t.makespan, makespan));
          BOOST_CHECK(at_most(t.peak_memory, level));
          if (level < levels.back()) ++found_below_the_top;
        }
      }
    }
    BOOST_CHECK_GT(found_below_the_top, 0);
  }
}

BOOST_AUTO_TEST_CASE(the_peak_comes_down_and_the_makespan_does_not_grow) {
  // Four devices, eight micro-batches: too many orders to try them all.
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  int lowered = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Order order = searched(p, 20000, seed);
    const Timing before = evaluate(p, order);
    ExactOptions o;
    o.nodes = 3000;
    o.seed = seed;
    const ExactStats st = lower_peak_exactly(p, order, 0.0, o);
    const Timing after = evaluate(p, order);
    BOOST_REQUIRE(after.valid);
    BOOST_CHECK(at_most(after.makespan, before.makespan));
    BOOST_CHECK(at_most(after.peak_memory, before.peak_memory));
    BOOST_CHECK_LE(st.nodes, o.nodes);
    BOOST_CHECK_EQUAL(st.levels_found > 0, after.peak_memory < before.peak_memory);
    lowered += st.levels_found > 0;
    // The same seed and budget: the same order.
    Order again = searched(p, 20000, seed);
    lower_peak_exactly(p, again, 0.0, o);
    BOOST_CHECK(again == order);
  }
  BOOST_CHECK_GT(lowered, 0);
}

BOOST_AUTO_TEST_CASE(a_level_below_every_forward_or_a_stop_finds_nothing) {
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  const double makespan = evaluate(p, searched(p, 20000, 1)).makespan;
  ExactOptions o;
  o.nodes = 1000;
  ExactStats st;
  // One forward's activation cannot be held below its own size.
  BOOST_CHECK(!order_within(p, makespan, 1.0, o, &st));
  BOOST_CHECK_LE(st.nodes, 1000u);
  // A schedule at any level with room, but the search is told to stop at once.
  o.stop = [] { return true; };
  Order order = searched(p, 20000, 1);
  const Order kept = order;
  const ExactStats stopped = lower_peak_exactly(p, order, 0.0, o);
  BOOST_CHECK(order == kept);
  BOOST_CHECK_EQUAL(stopped.levels_found, 0);
  BOOST_CHECK_LE(stopped.nodes, kExactRestartNodes);
}

BOOST_AUTO_TEST_CASE(a_descent_led_by_a_schedule_meets_it_without_going_back) {
  // Every window is a necessary condition, so a schedule at the makespan and level never
  // closes one: led by it, one descent takes its order decision by decision.
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const Order guide = searched(p, 20000, seed);
    const Timing t = evaluate(p, guide);
    ExactOptions o;
    o.nodes = 0;
    o.restart_nodes = 1;
    o.descents = 1;
    o.guide = &guide;
    ExactStats st;
    const std::optional<Order> found = order_within(p, t.makespan, t.peak_memory, o, &st);
    BOOST_REQUIRE(found.has_value());
    BOOST_CHECK_EQUAL(st.nodes, static_cast<std::uint64_t>(p.num_tasks) + 1);  // the root and one a decision
    for (int d = 0; d < p.devices; ++d) {
      const auto first = static_cast<std::ptrdiff_t>(d) * p.per_device;
      BOOST_CHECK(std::equal(guide.begin() + first, guide.begin() + first + p.per_device, found->begin() + first));
    }
  }
}

BOOST_AUTO_TEST_CASE(it_runs_where_a_program_holds_the_counts) {
  const Problem small = build_problem(testing::two_models(2, 8, 1, 3.0, 2.0));
  BOOST_CHECK(exact_applies(small));
  BOOST_CHECK(exact_applies(small, grid_points(small)));
  BOOST_CHECK(!exact_applies(small, grid_points(small) - 1));
  // A chain of 256 micro-batches: a point's counts no longer fit a byte each.
  const Problem long_chains = build_problem(testing::two_models(2, 256, 1, 3.0, 2.0));
  BOOST_CHECK(!exact_applies(long_chains, std::numeric_limits<std::size_t>::max()));
  ExactOptions o;
  o.nodes = 10;
  BOOST_CHECK_THROW(order_within(long_chains, 1e9, 1e9, o), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
