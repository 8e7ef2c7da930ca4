// Lowered instruction streams run as predicted, survive a trip through JSON,
// and a dry run catches what is wrong with broken ones.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "helpers.hpp"
#include "sched/baselines.hpp"
#include "sched/dryrun.hpp"
#include "sched/lower.hpp"
#include "sched/schedule_json.hpp"

using namespace braid::sched;

namespace {

struct Fixture {
  Problem p;
  Order order;
  Timing timing;
  Lowered lowered;
  explicit Fixture(double p2p) : p(make(p2p)), order(*greedy(p)), timing(evaluate(p, order)), lowered(lower(p, order, timing)) {}
  static Problem make(double p2p) {
    SchedSpec s = testing::two_models(4, 8, 2, 5.0, 4.0);
    s.p2p_time = p2p;
    return build_problem(s);
  }
};

std::size_t find_op(const std::vector<Instr>& stream, Op op) {
  return static_cast<std::size_t>(std::find_if(stream.begin(), stream.end(), [&](const Instr& i) { return i.op == op; }) - stream.begin());
}

}  // namespace

BOOST_AUTO_TEST_CASE(lowered_streams_run_in_the_predicted_time) {
  for (double p2p : {0.0, 0.5, 3.0}) {
    Fixture f(p2p);
    const DryRun r = dry_run(f.p, f.lowered);
    BOOST_REQUIRE_MESSAGE(r.ok, r.problem << "\n" << r.grid);
    BOOST_CHECK(same_time(r.makespan, f.timing.makespan));
    // Every cross-device edge becomes exactly one SEND and one RECV.
    std::size_t sends = 0, recvs = 0, edges = 0;
    for (const auto& s : f.lowered.streams) {
      for (const Instr& i : s) {
        sends += i.op == Op::SEND_F || i.op == Op::SEND_B;
        recvs += i.op == Op::RECV_F || i.op == Op::RECV_B;
      }
    }
    for (int t = 0; t < f.p.num_tasks; ++t) {
      const auto pr = f.p.pred[static_cast<std::size_t>(t)];
      edges += pr >= 0 && f.p.device[static_cast<std::size_t>(pr)] != f.p.device[static_cast<std::size_t>(t)];
    }
    BOOST_CHECK_EQUAL(sends, edges);
    BOOST_CHECK_EQUAL(recvs, edges);
  }
}

BOOST_AUTO_TEST_CASE(an_injected_deadlock_is_caught_and_shown) {
  Fixture f(0.0);
  // Device 0 first waits for a gradient that only exists after its own forwards.
  auto& s = f.lowered.streams[0];
  const std::size_t at = find_op(s, Op::RECV_B);
  BOOST_REQUIRE_LT(at, s.size());
  const Instr recv = s[at];
  s.erase(s.begin() + static_cast<std::ptrdiff_t>(at));
  s.insert(s.begin(), recv);
  const DryRun r = dry_run(f.p, f.lowered);
  BOOST_CHECK(!r.ok);
  BOOST_CHECK_NE(r.problem.find("deadlock"), std::string::npos);
  BOOST_CHECK_NE(r.grid.find("*RECV_B"), std::string::npos);  // the step where device 0 waits
  BOOST_CHECK_NE(r.grid.find("dev 0: waits for a tensor"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(too_few_buffers_deadlock_or_are_refused) {
  Fixture f(0.0);
  // Pretend every pool has one buffer fewer where there were several: sends
  // then name buffers that do not exist.
  bool shrunk = false;
  for (auto& dev : f.lowered.buffers) {
    for (int& count : dev) {
      if (count > 1) {
        --count;
        shrunk = true;
      }
    }
  }
  BOOST_REQUIRE(shrunk);
  const DryRun r = dry_run(f.p, f.lowered);
  BOOST_CHECK(!r.ok);
  BOOST_CHECK_NE(r.problem.find("outside device"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_receive_of_the_wrong_tensor_is_caught) {
  Fixture f(0.0);
  // Device 1's first activation receive claims to be for the next micro-batch.
  auto& s = f.lowered.streams[1];
  std::vector<std::size_t> recvs;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i].op == Op::RECV_F && s[i].peer == 0) recvs.push_back(i);
  }
  BOOST_REQUIRE_GE(recvs.size(), 2u);
  s[recvs[0]].task = s[recvs[1]].task;
  const DryRun r = dry_run(f.p, f.lowered);
  BOOST_CHECK(!r.ok);
  BOOST_CHECK_NE(r.problem.find("holds the output of subtask"), std::string::npos);
  BOOST_CHECK(!r.grid.empty());
}

BOOST_AUTO_TEST_CASE(schedule_json_round_trip) {
  Fixture f(0.5);
  ScheduleSummary sum;
  sum.lower_bound = 1;
  const std::string text = schedule_to_json(f.p, f.order, f.timing, f.lowered, sum).dump();
  const LoadedSchedule back = load_schedule(braid::parse_json_text(text, "schedule.json"), "schedule.json");
  BOOST_CHECK_EQUAL(back.problem.num_tasks, f.p.num_tasks);
  BOOST_CHECK(same_time(back.makespan, f.timing.makespan));
  BOOST_REQUIRE_EQUAL(back.lowered.streams.size(), f.lowered.streams.size());
  for (std::size_t d = 0; d < f.lowered.streams.size(); ++d) {
    BOOST_REQUIRE_EQUAL(back.lowered.streams[d].size(), f.lowered.streams[d].size());
    for (std::size_t i = 0; i < f.lowered.streams[d].size(); ++i) {
      BOOST_CHECK(back.lowered.streams[d][i].op == f.lowered.streams[d][i].op);
      BOOST_CHECK_EQUAL(back.lowered.streams[d][i].task, f.lowered.streams[d][i].task);
      BOOST_CHECK_EQUAL(back.lowered.streams[d][i].buffer, f.lowered.streams[d][i].buffer);
    }
    BOOST_CHECK(back.lowered.buffers[d] == f.lowered.buffers[d]);
  }
  const DryRun r = dry_run(back.problem, back.lowered);
  BOOST_CHECK(r.ok);
  BOOST_CHECK(same_time(r.makespan, f.timing.makespan));
}

// The activation slots a stream needs: 1F1B keeps stage s of S in flight for S - s
// micro-batches (its warm-up), the last stage for one. Under any order a device's peak
// activation memory lies between the largest model's slots and all of them together.
BOOST_AUTO_TEST_CASE(activations_in_flight_follow_the_order) {
  const Problem p = build_problem(testing::two_models(4, 8, 2, 5.0, 4.0));
  const Order order = one_f_one_b(p);
  const Lowered lowered = lower(p, order, evaluate(p, order));
  for (int d = 0; d < 4; ++d) {
    BOOST_TEST(activations_in_flight(p, lowered.streams[static_cast<std::size_t>(d)], 0) == 4 - d);
  }
  const Fixture f(0.0);
  const std::vector<double> peaks = device_peaks(f.p, f.order);
  const double act_mem[] = {2.0, 1.5};  // two_models' defaults, every stage
  for (int d = 0; d < 4; ++d) {
    double most = 0, all = 0;
    for (int m = 0; m < 2; ++m) {
      const double held = act_mem[m] * activations_in_flight(f.p, f.lowered.streams[static_cast<std::size_t>(d)], m);
      most = std::max(most, held);
      all += held;
    }
    BOOST_TEST(peaks[static_cast<std::size_t>(d)] >= most - 1e-9);
    BOOST_TEST(peaks[static_cast<std::size_t>(d)] <= all + 1e-9);
    BOOST_TEST(most > 0);
  }
}
