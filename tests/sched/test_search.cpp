// The latency search on small integer-cost problems (the flat landscapes of the
// paper's own encoding): it reaches the bound within a fixed iteration budget, and
// with an iteration budget alone its result is a function of the options.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "helpers.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"

using namespace braid::sched;

namespace {

AnnealOptions budget(std::uint64_t seed, std::uint64_t iterations) {
  AnnealOptions o;
  o.seed = seed;
  o.iterations = iterations;
  o.time_limit = 0;
  o.mem_iterations = 20000;
  return o;
}

// An 8-stage actor beside two mirrored 4-stage critics, integer costs as the
// paper's code writes them (forward 5 and 4, backward twice that).
SchedSpec integer_fusion(int micro_batches) {
  return testing::two_models(8, micro_batches, 2, 5.0, 4.0, 1.95, 2.0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(reaches_the_bound_on_an_integer_landscape) {
  const Problem p = build_problem(integer_fusion(8));
  const double bound = lower_bound(p).value;
  const Order start = *greedy(p);
  BOOST_REQUIRE_GT(evaluate(p, start).makespan, bound);  // the search has work to do
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const AnnealResult r = anneal(p, start, bound, budget(seed, 2'000'000));
    BOOST_CHECK_MESSAGE(r.stats.reached_bound, "seed " << seed << ": " << r.makespan << " vs bound " << bound);
    BOOST_CHECK(same_time(r.makespan, bound));
    BOOST_CHECK_GT(r.stats.plateau, 0U);  // equal-makespan moves exist and were met
  }
}

BOOST_AUTO_TEST_CASE(swaps_drawn_anywhere_or_on_a_longest_path_both_reach_the_bound) {
  // The default draws most swaps at subtasks on a longest path; every share, from
  // none to all of them, keeps the search correct and reaches this bound.
  const Problem p = build_problem(integer_fusion(8));
  const double bound = lower_bound(p).value;
  for (double share : {0.0, 0.75, 1.0}) {
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      AnnealOptions o = budget(seed, 2'000'000);
      o.critical_moves = share;
      const AnnealResult r = anneal(p, *greedy(p), bound, o);
      const Timing check = evaluate(p, r.order);
      BOOST_REQUIRE(check.valid);
      BOOST_CHECK(same_time(check.makespan, r.makespan));
      BOOST_CHECK_MESSAGE(r.stats.reached_bound, "share " << share << " seed " << seed << ": " << r.makespan
                                                          << " vs bound " << bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_tie_break_keeps_the_search_correct) {
  const Problem p = build_problem(integer_fusion(8));
  const double bound = lower_bound(p).value;
  for (TieBreak t : {TieBreak::none, TieBreak::finish, TieBreak::flow, TieBreak::critical, TieBreak::memory}) {
    AnnealOptions o = budget(5, 300'000);
    o.tie_break = t;
    const AnnealResult r = anneal(p, *greedy(p), bound, o);
    const Timing check = evaluate(p, r.order);
    BOOST_REQUIRE(check.valid);
    BOOST_CHECK(same_time(check.makespan, r.makespan));
    BOOST_CHECK_GE(r.makespan, bound - 1e-9);
    BOOST_CHECK_LE(r.makespan, evaluate(p, *greedy(p)).makespan + 1e-9);
  }
  BOOST_CHECK(parse_tie_break("critical") == TieBreak::critical);
  BOOST_CHECK(parse_tie_break("memory") == TieBreak::memory);
  BOOST_CHECK_EQUAL(tie_break_name(TieBreak::memory), "memory");
  BOOST_CHECK_THROW(parse_tie_break("slack"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(an_iteration_budget_gives_the_same_schedule_every_time) {
  const Problem p = build_problem(integer_fusion(16));
  const double bound = lower_bound(p).value;
  // A budget too small to reach the bound, so the whole budget is spent.
  AnnealOptions o = budget(3, 200'000);
  const AnnealResult a = anneal(p, *greedy(p), bound, o);
  const AnnealResult b = anneal(p, *greedy(p), bound, o);
  BOOST_CHECK(a.order == b.order);
  BOOST_CHECK_EQUAL(a.stats.iterations, b.stats.iterations);
  BOOST_CHECK_EQUAL(a.stats.accepted, b.stats.accepted);
  BOOST_CHECK_EQUAL(a.makespan, b.makespan);
  BOOST_CHECK_EQUAL(a.peak_memory, b.peak_memory);
  o.seed = 4;
  const AnnealResult c = anneal(p, *greedy(p), bound, o);
  BOOST_CHECK(c.order != a.order);  // another seed walks elsewhere
}

// The memory tie-break, run on from a schedule at the bound with a bound it never
// reaches (the paper's code's lexicographic energy, walked for its whole budget): its
// best is lexicographic (makespan, then memory), so it never ends slower than its
// start, nor, at the same makespan, with a higher highest-plus-quarter-mean peak.
BOOST_AUTO_TEST_CASE(the_memory_tie_break_keeps_the_makespan_and_never_raises_memory) {
  const Problem p = build_problem(integer_fusion(8));
  const double bound = lower_bound(p).value;
  const AnnealResult at_bound = anneal(p, *greedy(p), bound, budget(1, 2'000'000));
  BOOST_REQUIRE(at_bound.stats.reached_bound);
  auto memory_key = [&](const Order& o) {
    const Timing t = evaluate(p, o);
    double sum = 0;
    for (double v : t.device_peak) sum += v;
    return t.peak_memory + 0.25 * sum / p.devices;
  };
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    AnnealOptions o = budget(seed, 300'000);
    o.tie_break = TieBreak::memory;
    o.memory_pass = false;
    const AnnealResult r = anneal(p, at_bound.order, -1.0, o);  // a bound never reached: the whole budget
    const Timing t = evaluate(p, r.order);
    BOOST_REQUIRE(t.valid);
    BOOST_CHECK(same_time(t.makespan, at_bound.makespan));
    BOOST_CHECK_LE(memory_key(r.order), memory_key(at_bound.order) + 1e-9);
    BOOST_CHECK_EQUAL(r.stats.iterations, 300'000U);
    BOOST_CHECK_GT(r.stats.plateau, 0U);
    BOOST_TEST_MESSAGE("seed " << seed << ": peak " << at_bound.peak_memory << " -> " << t.peak_memory);
  }
}

// A pass whose highest peak has stopped falling ends (stalls) long before a large
// budget, so a caller can spend the rest on another pass; its result holds the lowest
// peak it met. (It used to stall on its energy, whose tie-breaking terms keep
// creeping down after the peak has stopped: one pass then took the whole budget.)
BOOST_AUTO_TEST_CASE(the_memory_pass_stalls_on_its_peak) {
  const Problem p = build_problem(integer_fusion(8));
  const Order start = *greedy(p);
  const Timing before = evaluate(p, start);
  const double serial_peak = serial_1f1b(p.spec).peak_memory;
  constexpr std::uint64_t budget = 400'000'000;
  AnnealStats st;
  const Order lowered = lower_memory(p, start, budget, 0, 0.0, 3, 0, &st);
  const Timing t = evaluate(p, lowered);
  BOOST_REQUIRE(t.valid);
  BOOST_CHECK(st.mem_stalled);
  BOOST_CHECK_LT(st.mem_iterations, budget / 4);
  BOOST_CHECK_LE(t.makespan, before.makespan * (1 + 1e-12));
  BOOST_CHECK_LE(t.peak_memory, before.peak_memory + 1e-9);
  BOOST_TEST_MESSAGE("peak " << before.peak_memory << " -> " << t.peak_memory << " (serial 1F1B " << serial_peak
                             << ") after " << st.mem_iterations << " neighbours");
}

// The level the memory pass counts memory above follows its lowest peak down (by
// default two mean activations below it) or, with a large margin, stays at the target.
// Every margin keeps the makespan and holds the lowest peak met; the margin reaches the
// walk (the two end in different schedules).
BOOST_AUTO_TEST_CASE(the_memory_pass_counts_memory_above_a_level_near_its_peak) {
  const Problem p = build_problem(integer_fusion(16));
  const Order start = *greedy(p);
  const Timing before = evaluate(p, start);
  const double serial_peak = serial_1f1b(p.spec).peak_memory;
  std::vector<Order> ends;
  for (const double margin : {0.0, kMemLevelMargin, 1e9}) {
    AnnealStats st;
    ends.push_back(lower_memory(p, start, 300'000, 0, serial_peak, 2, 0, &st, 0.5, kMemChainMoves, margin));
    const Timing t = evaluate(p, ends.back());
    BOOST_REQUIRE(t.valid);
    BOOST_CHECK_LE(t.makespan, before.makespan * (1 + 1e-12));
    BOOST_CHECK_LT(t.peak_memory, before.peak_memory);
    BOOST_CHECK_GE(t.peak_memory, serial_peak - 1e-9);
    BOOST_TEST_MESSAGE("margin " << margin << ": peak " << before.peak_memory << " -> " << t.peak_memory);
  }
  BOOST_CHECK(ends[1] != ends[2]);
}

// The memory pass with a fixed budget is a function of its inputs, never leaves the
// makespan of its start, and another stream walks elsewhere.
BOOST_AUTO_TEST_CASE(the_memory_pass_is_reproducible_and_keeps_the_makespan) {
  const Problem p = build_problem(integer_fusion(16));
  const Order start = *greedy(p);
  const Timing before = evaluate(p, start);
  const double serial_peak = serial_1f1b(p.spec).peak_memory;
  AnnealStats sa, sb;
  const Order a = lower_memory(p, start, 200'000, 0, serial_peak, 5, 0, &sa);
  const Order b = lower_memory(p, start, 200'000, 0, serial_peak, 5, 0, &sb);
  BOOST_CHECK(a == b);
  BOOST_CHECK_EQUAL(sa.mem_iterations, sb.mem_iterations);
  for (std::uint64_t stream = 0; stream < 4; ++stream) {
    const Order c = lower_memory(p, start, 200'000, 0, serial_peak, 5, stream);
    const Timing t = evaluate(p, c);
    BOOST_REQUIRE(t.valid);
    BOOST_CHECK_LE(t.makespan, before.makespan * (1 + 1e-12));
    BOOST_CHECK_LE(t.peak_memory, before.peak_memory + 1e-9);
    if (stream > 0) BOOST_CHECK(c != a);
  }
}
