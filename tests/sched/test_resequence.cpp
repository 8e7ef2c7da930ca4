// A device made again exactly (sched/resequence.hpp): the dynamic program's
// lowest peak against every order of the device's subtasks, and the sweep's
// promises (the makespan never grows, no device's peak rises).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <limits>

#include "helpers.hpp"
#include "sched/baselines.hpp"
#include "sched/resequence.hpp"

using namespace braid::sched;

namespace {

// Device d run in `seq` with every other device's times held (those of t): the
// peak, or infinity when a subtask starts before its input, ends after its
// successor on another device must start (lf: latest ends), or after the makespan,
// or when two micro-batches of one stage pass each other, or a B its F.
double peak_within_windows(const Problem& p, const Timing& t, const std::vector<double>& lf, int d, double makespan,
                           const std::vector<std::int32_t>& seq) {
  double now = 0, level = 0, peak = 0;
  std::vector<int> seen(static_cast<std::size_t>(p.num_tasks), 0);
  for (std::int32_t x : seq) {
    const auto xi = static_cast<std::size_t>(x);
    const int j = p.micro_batch[xi];
    if (j > 0 && !seen[static_cast<std::size_t>(p.task_id(p.model[xi], p.replica[xi], p.stage[xi], j - 1, p.kind[xi]))]) {
      return kInf;
    }
    if (p.kind[xi] == Kind::B && !seen[static_cast<std::size_t>(p.task_id(p.model[xi], p.replica[xi], p.stage[xi], j, Kind::F))]) {
      return kInf;
    }
    double start = now;
    if (const std::int32_t pr = p.pred[xi]; pr >= 0 && p.device[static_cast<std::size_t>(pr)] != d) {
      start = std::max(start, t.end[static_cast<std::size_t>(pr)] + p.lag[xi]);
    }
    now = start + p.dur[xi];
    if (now > makespan * (1 + 1e-12)) return kInf;
    if (const std::int32_t sc = p.succ[xi]; sc >= 0 && p.device[static_cast<std::size_t>(sc)] != d) {
      const auto si = static_cast<std::size_t>(sc);
      if (now > lf[si] - p.dur[si] - p.lag[si] + 1e-9) return kInf;
    }
    level += p.mem_delta[xi];
    peak = std::max(peak, level);
    seen[xi] = 1;
  }
  return peak;
}

// The lowest peak over every order of device d's subtasks that meets the windows.
double lowest_by_enumeration(const Problem& p, const Timing& t, const std::vector<double>& lf, int d, double makespan) {
  std::vector<std::int32_t> seq;
  for (int i = 0; i < p.per_device; ++i) seq.push_back(d * p.per_device + i);
  std::sort(seq.begin(), seq.end());
  double best = kInf;
  do {
    best = std::min(best, peak_within_windows(p, t, lf, d, makespan, seq));
  } while (std::next_permutation(seq.begin(), seq.end()));
  return best;
}

// Schedules of p to start from: greedy fusion, 1F1B, and latency searches of a few
// budgets (at and above their best makespans).
std::vector<Order> starts_of(const Problem& p) {
  std::vector<Order> out{*greedy(p), one_f_one_b(p)};
  for (std::uint64_t it : {200u, 2000u, 20000u}) out.push_back(testing::latency_searched(p, it, it, 0.0));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resequence)

BOOST_AUTO_TEST_CASE(the_program_finds_the_lowest_peak_any_order_of_the_device_has) {
  // Tiny enough to try every order of a device (8 and 6 subtasks), with and without
  // a p2p lag, so that the windows differ from device to device.
  std::vector<SchedSpec> specs{testing::two_models(2, 2, 1, 3.0, 2.0), testing::two_models(4, 2, 2, 3.0, 2.0, 2.0, 3.5)};
  specs.push_back(specs.back());
  specs.back().p2p_time = 0.5;
  int compared = 0, below_present = 0;
  for (const SchedSpec& spec : specs) {
    const Problem p = build_problem(spec);
    for (const Order& order : starts_of(p)) {
      const Timing t = evaluate(p, order);
      BOOST_REQUIRE(t.valid);
      const std::vector<double> lf = latest_finish(p, order, t, t.makespan);
      for (int d = 0; d < p.devices; ++d) {
        const double want = lowest_by_enumeration(p, t, lf, d, t.makespan);
        const auto got = lowest_peak_sequence(p, t.end, lf, d, t.makespan, t.device_peak[static_cast<std::size_t>(d)], std::size_t{1} << 20);
        if (want == kInf) {
          BOOST_TEST(!got.has_value());
          continue;
        }
        BOOST_REQUIRE(got.has_value());
        BOOST_TEST(got->peak == want, boost::test_tools::tolerance(1e-9));
        // The order it offers is one of them, with that peak.
        BOOST_TEST(peak_within_windows(p, t, lf, d, t.makespan, got->order) == want, boost::test_tools::tolerance(1e-9));
        ++compared;
        const double present = t.device_peak[static_cast<std::size_t>(d)];
        if (want < present - 1e-9) ++below_present;
        // Pick::highest under a cap just below the present peak: an order that meets
        // the windows, within the cap, whenever one exists (the lowest is within it).
        const double cap = present - 1e-6;
        const auto high = lowest_peak_sequence(p, t.end, lf, d, t.makespan, cap, std::size_t{1} << 20, {}, Pick::highest);
        BOOST_TEST(high.has_value() == (want <= cap));
        if (high) {
          BOOST_TEST(high->peak >= got->peak - 1e-9);
          BOOST_TEST(peak_within_windows(p, t, lf, d, t.makespan, high->order) <= cap);
        }
      }
    }
  }
  BOOST_TEST(compared >= 40);
  BOOST_TEST(below_present > 0);  // some device could come down: the comparison is not only at the present peak
}

BOOST_AUTO_TEST_CASE(a_grid_too_large_or_a_deadline_leaves_the_device_alone) {
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  const Order order = *greedy(p);
  const Timing t = evaluate(p, order);
  const std::vector<double> lf = latest_finish(p, order, t, t.makespan);
  // The grid: (8 + 1)^2 for the actor's two chains, (4 + 1)^2 for the critic's.
  BOOST_TEST(grid_points(p) == 81u * 25u);
  BOOST_TEST(!lowest_peak_sequence(p, t.end, lf, 0, t.makespan, t.device_peak[0], grid_points(p) - 1).has_value());
  BOOST_TEST(lowest_peak_sequence(p, t.end, lf, 0, t.makespan, t.device_peak[0], grid_points(p)).has_value());
  BOOST_TEST(!lowest_peak_sequence(p, t.end, lf, 0, t.makespan, t.device_peak[0], 100).has_value());
  BOOST_TEST(lowest_peak_sequence(p, t.end, lf, 0, t.makespan, t.device_peak[0], std::size_t{1} << 20).has_value());
  // Told to stop (a deadline), it offers nothing rather than a half-searched level.
  BOOST_TEST(!lowest_peak_sequence(p, t.end, lf, 0, t.makespan, t.device_peak[0], std::size_t{1} << 20, [] { return true; }).has_value());
}

BOOST_AUTO_TEST_CASE(a_sweep_keeps_the_makespan_and_raises_no_peak) {
  int lowered = 0;
  for (const SchedSpec& spec : {testing::two_models(4, 8, 2, 3.0, 2.0), testing::two_models(4, 8, 1, 2.0, 3.0, 1.0, 2.5)}) {
    const Problem p = build_problem(spec);
    for (Order order : starts_of(p)) {
      const Timing before = evaluate(p, order);
      const ResequenceStats st = resequence_devices(p, order);
      const Timing after = evaluate(p, order);
      BOOST_REQUIRE(after.valid);
      BOOST_TEST(after.makespan <= before.makespan * (1 + 1e-12));
      for (int d = 0; d < p.devices; ++d) {
        BOOST_TEST(after.device_peak[static_cast<std::size_t>(d)] <= before.device_peak[static_cast<std::size_t>(d)] + 1e-9);
      }
      BOOST_TEST(st.kept >= st.lowered);
      lowered += st.lowered;
    }
  }
  BOOST_TEST(lowered > 0);
}

BOOST_AUTO_TEST_CASE(only_the_devices_at_the_highest_peak_may_have_the_larger_grids) {
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  const Order start = *greedy(p);
  const Timing t = evaluate(p, start);
  int at_peak = 0;
  for (double v : t.device_peak) at_peak += same_time(v, t.peak_memory) ? 1 : 0;
  BOOST_REQUIRE(at_peak < p.devices);
  ResequenceOptions opt;
  opt.rounds = 1;
  opt.max_states = grid_points(p) - 1;  // every grid too large ...
  opt.peak_states = grid_points(p) - 1;
  Order order = start;
  BOOST_TEST(resequence_devices(p, order, opt).tried == 0);
  opt.peak_states = grid_points(p);  // ... but the devices at the peak
  order = start;
  const ResequenceStats st = resequence_devices(p, order, opt);
  BOOST_TEST(st.tried >= 1);
  BOOST_TEST(st.tried + st.skipped == p.devices);
  BOOST_TEST(st.skipped >= 1);  // a device below the peak (until the peak comes down to it)
}

BOOST_AUTO_TEST_CASE(a_clocked_phase_keeps_back_time_for_the_last_sweep) {
  const Problem small = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  const Problem large = build_problem(testing::two_models(4, 256, 1, 3.0, 2.0));  // 257^4 points: no program
  BOOST_TEST(resequence_reserve(small, 0) == 0.0);  // no clock
  BOOST_TEST(resequence_reserve(small, 10) > 0.0);
  BOOST_TEST(resequence_reserve(small, 10) <= 1.0);
  BOOST_TEST(resequence_reserve(large, 10) == 0.0);
  const Problem mid = build_problem(testing::two_models(4, 64, 1, 3.0, 2.0));  // 65^4 = 1.8e7 points
  BOOST_TEST(resequence_reserve(mid, 30) > resequence_reserve(small, 30));
  BOOST_TEST(resequence_reserve(mid, 1) == 0.1);  // at most a tenth
}

BOOST_AUTO_TEST_CASE(a_sweep_that_is_told_to_stop_changes_nothing) {
  const Problem p = build_problem(testing::two_models(4, 8, 2, 3.0, 2.0));
  Order order = *greedy(p);
  const Order before = order;
  ResequenceOptions opt;
  opt.stop = [] { return true; };
  const ResequenceStats st = resequence_devices(p, order, opt);
  BOOST_TEST(st.tried == 0);
  BOOST_TEST((order == before));
}

BOOST_AUTO_TEST_SUITE_END()
