// The incremental timeline must agree with the from-scratch evaluation after
// every kind of move: kept, refused, rolled back on the threshold, undone.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "core/rng.hpp"
#include "helpers.hpp"
#include "sched/baselines.hpp"
#include "sched/timeline.hpp"

using namespace braid::sched;

namespace {

void expect_matches_scratch(const Problem& p, const Timeline& tl) {
  const Timing t = evaluate(p, tl.order());
  BOOST_REQUIRE_MESSAGE(t.valid, t.problem);
  for (std::size_t i = 0; i < t.start.size(); ++i) {
    BOOST_REQUIRE_CLOSE_FRACTION(tl.start()[i] + 1, t.start[i] + 1, 1e-12);
    BOOST_REQUIRE_CLOSE_FRACTION(tl.end()[i], t.end[i], 1e-12);
  }
  BOOST_REQUIRE_CLOSE_FRACTION(tl.makespan(), t.makespan, 1e-12);
  // The tie-breaks of the latency search, kept incrementally, against a recount.
  double end_sum = 0, finish_sum = 0;
  for (double e : t.end) end_sum += e;
  for (int d = 0; d < p.devices; ++d) {
    finish_sum += t.end[static_cast<std::size_t>(tl.order()[static_cast<std::size_t>((d + 1) * p.per_device - 1)])];
  }
  BOOST_REQUIRE_CLOSE_FRACTION(tl.end_sum(), end_sum, 1e-9);
  BOOST_REQUIRE_CLOSE_FRACTION(tl.finish_sum(), finish_sum, 1e-9);
  // Critical subtasks: those whose start + longest path to the end is the makespan,
  // recounted from a fresh timeline of the same order.
  const Timeline fresh(p, tl.order());
  // Memory levels: bit for bit (a level is the one before plus the subtask's delta,
  // however the order was reached; an undo gives the old one back).
  for (int d = 0; d < p.devices; ++d) {
    for (int i = 0; i < p.per_device; ++i) BOOST_REQUIRE_EQUAL(tl.device_level(d, i), fresh.device_level(d, i));
  }
  BOOST_REQUIRE_EQUAL(tl.critical_count(), fresh.critical_count());
  for (std::int32_t task = 0; task < p.num_tasks; ++task) BOOST_REQUIRE_EQUAL(tl.critical(task), fresh.critical(task));
  BOOST_REQUIRE_GE(tl.critical_count(), 1);
}

// Undoes a kept move three times in ten, and checks that the order is `before` again.
void undo_now_and_then(Timeline& tl, braid::Rng& rng, const Order& before) {
  if (rng.uniform() < 0.3) {
    tl.undo();
    BOOST_REQUIRE(tl.order() == before);
  }
}

void random_walk(const SchedSpec& spec, std::uint64_t seed, int moves) {
  const Problem p = build_problem(spec);
  Timeline tl(p, one_f_one_b(p));
  braid::Rng rng(seed);
  int kept = 0, slow = 0, invalid = 0;
  for (int k = 0; k < moves; ++k) {
    const int d = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices)));
    const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.per_device - 1)));
    const double current = tl.makespan();
    // Thresholds from "must improve" to "anything goes".
    const double threshold = current + (rng.uniform() - 0.3) * 0.2 * current;
    const Order before = tl.order();
    const SwapResult r = tl.swap(d, i, threshold);
    if (r == SwapResult::done) {
      ++kept;
      BOOST_REQUIRE_LE(tl.makespan(), threshold);
      undo_now_and_then(tl, rng, before);
    } else {
      BOOST_REQUIRE(tl.order() == before);
      if (r == SwapResult::too_slow) {
        ++slow;
        // Refused as too slow: the swap really would exceed the threshold.
        Order swapped = before;
        std::swap(swapped[static_cast<std::size_t>(d * p.per_device + i)],
                  swapped[static_cast<std::size_t>(d * p.per_device + i + 1)]);
        const Timing t = evaluate(p, swapped);
        BOOST_REQUIRE(t.valid);
        BOOST_REQUIRE_GT(t.makespan, threshold);
      } else {
        ++invalid;
      }
    }
    if (k % 7 == 0) expect_matches_scratch(p, tl);
  }
  expect_matches_scratch(p, tl);
  BOOST_TEST_MESSAGE("kept " << kept << ", too slow " << slow << ", invalid " << invalid);
  BOOST_CHECK_GT(kept, 0);
  BOOST_CHECK_GT(slow, 0);
  BOOST_CHECK_GT(invalid, 0);
}

// Chain moves (one micro-batch's forwards or backwards, one place on every device)
// mixed with swaps: the same agreement with a from-scratch evaluation, a move is
// all or nothing, and only the shifted chain is held to the threshold (a state on
// the way may exceed it).
void chain_walk(const SchedSpec& spec, std::uint64_t seed, int moves) {
  const Problem p = build_problem(spec);
  Timeline tl(p, one_f_one_b(p));
  ChainMove chain(p);
  braid::Rng rng(seed);
  int kept = 0, slow = 0, invalid = 0, unplanned = 0, through_slower = 0;
  for (int k = 0; k < moves; ++k) {
    if (rng.uniform() < 0.5) {  // swaps in between, so chains meet every kind of neighbour
      (void)tl.swap(static_cast<int>(rng.below(static_cast<std::uint64_t>(p.devices))),
                    static_cast<int>(rng.below(static_cast<std::uint64_t>(p.per_device - 1))));
      continue;
    }
    const auto t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(p.num_tasks)));
    const int dir = rng.below(2) == 0 ? 1 : -1;
    const Order before = tl.order();
    if (!chain.plan(tl, t, dir)) {
      ++unplanned;
      continue;
    }
    // What the move would give, from scratch, after each of its swaps (the last: the whole move).
    Order moved = before;
    std::vector<int> devices;
    double slowest_on_the_way = 0, moved_makespan = 0;
    bool valid_on_the_way = true;
    for (const auto& [d, i] : chain.planned()) {
      std::swap(moved[static_cast<std::size_t>(d * p.per_device + i)], moved[static_cast<std::size_t>(d * p.per_device + i + 1)]);
      devices.push_back(d);
      const Timing step = evaluate(p, moved);
      valid_on_the_way = valid_on_the_way && step.valid;
      if (step.valid) slowest_on_the_way = std::max(slowest_on_the_way, step.makespan);
      moved_makespan = step.makespan;
    }
    std::sort(devices.begin(), devices.end());
    BOOST_REQUIRE(std::adjacent_find(devices.begin(), devices.end()) == devices.end());  // one swap per device
    BOOST_REQUIRE_GE(devices.size(), 2u);
    const double current = tl.makespan();
    const double threshold = current + (rng.uniform() - 0.3) * 0.2 * current;
    const SwapResult r = chain.apply(tl, threshold);
    if (r == SwapResult::done) {
      ++kept;
      BOOST_REQUIRE(valid_on_the_way);
      BOOST_REQUIRE(tl.order() == moved);
      BOOST_REQUIRE_LE(tl.makespan(), threshold);
      if (slowest_on_the_way > threshold) ++through_slower;
      undo_now_and_then(tl, rng, before);
    } else {
      BOOST_REQUIRE(tl.order() == before);
      if (r == SwapResult::too_slow) {
        ++slow;
        // Refused as too slow: the shifted chain really exceeds the threshold.
        BOOST_REQUIRE(valid_on_the_way);
        BOOST_REQUIRE_GT(moved_makespan, threshold);
      } else {
        // Refused as invalid: some swap on the way breaks a dependency or deadlocks.
        ++invalid;
        BOOST_REQUIRE(!valid_on_the_way);
      }
    }
    if (k % 5 == 0) expect_matches_scratch(p, tl);
  }
  expect_matches_scratch(p, tl);
  BOOST_TEST_MESSAGE("chain moves kept " << kept << " (" << through_slower << " through a slower state), too slow "
                                         << slow << ", invalid " << invalid << ", unplanned " << unplanned);
  BOOST_CHECK_GT(kept, 0);
  BOOST_CHECK_GT(slow, 0);
  BOOST_CHECK_GT(unplanned, 0);
  BOOST_CHECK_GT(through_slower, 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(chain_moves_match_scratch) {
  chain_walk(testing::two_models(4, 8, 2, 5.0, 4.0), 5, 20000);
  SchedSpec s = testing::two_models(6, 6, 3, 3.0, 2.5);
  s.p2p_time = 0.7;
  s.models[0].fwd = {1, 2, 3, 1.5, 2.5, 0.5};
  chain_walk(s, 6, 20000);
}

BOOST_AUTO_TEST_CASE(incremental_times_match_scratch) {
  random_walk(testing::two_models(4, 8, 2, 5.0, 4.0), 1, 20000);
}

BOOST_AUTO_TEST_CASE(incremental_times_match_scratch_with_p2p_and_uneven_stages) {
  SchedSpec s = testing::two_models(6, 6, 3, 3.0, 2.5);
  s.p2p_time = 0.7;
  s.models[0].fwd = {1, 2, 3, 1.5, 2.5, 0.5};
  s.models[0].bwd = {2, 3, 7, 3, 4, 1};
  random_walk(s, 2, 20000);
}

BOOST_AUTO_TEST_CASE(incremental_times_match_scratch_three_models) {
  SchedSpec s = testing::two_models(4, 4, 1, 2.0, 1.0);
  ModelSpec third{.name = "reward", .stages = 2, .replicas = 2, .micro_batches = 2, .forward = true};
  // replicas 1, 1, 2 have no common factor > 1.
  third.fwd = {1.2, 0.8};
  third.bwd = {2.0, 1.7};
  third.act_mem = {1, 1};
  s.models.push_back(third);
  random_walk(s, 3, 20000);
}

BOOST_AUTO_TEST_CASE(memory_cap_is_never_exceeded) {
  SchedSpec s = testing::two_models(4, 8, 2, 5.0, 4.0);
  const Problem free_problem = build_problem(s);
  const double serial_peak = evaluate(free_problem, one_f_one_b(free_problem)).peak_memory;
  s.mem_capacity = serial_peak + 1.0;
  const Problem p = build_problem(s);
  Timeline tl(p, one_f_one_b(p));
  braid::Rng rng(4);
  for (int k = 0; k < 20000; ++k) {
    const int d = static_cast<int>(rng.below(4));
    const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.per_device - 1)));
    (void)tl.swap(d, i);
    if (k % 50 == 0) BOOST_REQUIRE_LE(evaluate(p, tl.order()).peak_memory, *s.mem_capacity + 1e-9);
  }
  BOOST_CHECK_LE(evaluate(p, tl.order()).peak_memory, *s.mem_capacity + 1e-9);
}
