// Lowered instruction streams run as predicted, survive a trip through JSON,
// and a dry run catches what is wrong with broken ones.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/made_from.hpp"

#include "helpers.hpp"
#include "sched/baselines.hpp"
#include "sched/dryrun.hpp"
#include "sched/lower.hpp"
#include "sched/schedule_json.hpp"

using namespace braid::sched;
using braid::ordered_json;

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
  const std::string text = schedule_to_json(f.p, f.order, f.timing, f.lowered, reference_summary(f.p)).dump();
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

// Every field of a schedule file is read and checked: a field deleted, of another type, out of
// its bounds or not what the spec and the order give, and subtasks missing, repeated, of another
// device or in another order than the instructions compute them, are refused naming the field
// (braid-schedgen --verify passed all of these).
BOOST_AUTO_TEST_CASE(a_schedule_file_is_refused_naming_any_field_that_is_wrong) {
  Fixture f(0.5);
  ScheduleSummary sum = reference_summary(f.p);
  sum.search = {{"ranks", 1}, {"winner_rank", 0}, {"seed", 1}, {"seconds", 0.2}, {"preset", "default"},
                {"anneal", {{"tie_break", "critical"}, {"t0_cycle", {1, 0.3}}}},
                {"latency_makespan", f.timing.makespan}, {"seconds_to_bound", 0.1}, {"iterations_to_bound", 50},
                {"iterations", 100}, {"dry_run_makespan", f.timing.makespan}};
  ordered_json good = schedule_to_json(f.p, f.order, f.timing, f.lowered, sum);
  ordered_json record = {{"tool", "braid-schedgen"}, {"output", ""}, {"options", {{"--seed", "1"}}},
                         {"given", {"--seed"}}, {"inputs", {{"spec", "a value"}}}};
  record["fingerprint"] = braid::fingerprint_of(record);
  good["made_from"] = record;
  auto refusal = [](const ordered_json& doc) -> std::string {
    try {
      load_schedule(braid::parse_json_text(doc.dump(), "s.json"), "s.json");
    } catch (const braid::InputError& e) {
      return e.what();
    }
    return "";
  };
  BOOST_REQUIRE_EQUAL(refusal(good), "");
  using Edit = std::function<void(ordered_json&)>;
  const auto set = [](const char* pointer, ordered_json v) -> Edit {
    return [p = std::string(pointer), v](ordered_json& d) { d[ordered_json::json_pointer(p)] = v; };
  };
  const auto erase = [](const char* parent, const char* key) -> Edit {
    return [p = std::string(parent), k = std::string(key)](ordered_json& d) { d[ordered_json::json_pointer(p)].erase(k); };
  };
  const std::vector<std::pair<Edit, std::string>> cases = {
      {set("/search/seed", -1), "search.seed: is -1"},
      {set("/search/seconds", 1e300), "search.seconds: is 1e+300"},
      {set("/search/anneal/tie_break", true), "search.anneal.tie_break: expected a string"},
      {set("/search/anneal/alpah", 0.9), "search.anneal.alpah: unknown key"},
      {set("/search/preset", "fast"), "search.preset"},
      {set("/search/iterations", std::uint64_t{1} << 63), "search.iterations"},
      {set("/search/anneal/t0_cycle", nullptr), "search.anneal.t0_cycle"},
      {set("/search/seconds_to_bound", nullptr), "search.seconds_to_bound: is null"},
      {set("/search/latency_makespan", 1e300), "search.latency_makespan: is 1e+300"},
      {set("/search/winner_rank", 1), "search.winner_rank: is 1, more than"},
      {set("/search/nosuch", 1), "search.nosuch: unknown key"},
      {set("/search", ordered_json::object()), "search: expected an object"},
      {set("/baselines/greedy/makespan", 1e300), "baselines.greedy.makespan: is 1e+300, but greedy"},
      {set("/baselines/serial_1f1b", nullptr), "baselines.serial_1f1b: expected an object"},
      {erase("", "lower_bound"), "lower_bound: missing"},
      {set("/lower_bound", 1.0), "lower_bound: is 1, but the spec's lower bound"},
      {set("/lower_bound_reached", !good["lower_bound_reached"].get<bool>()), "lower_bound_reached"},
      {set("/lower_bound_binding", "per_device_x"), "lower_bound_binding"},
      {set("/speedup_over_serial_1f1b", 1e300), "speedup_over_serial_1f1b"},
      {set("/peak_memory", 1e300), "peak_memory: is 1e+300"},
      {set("/made_from", 3), "made_from: is not a record of what made the file"},
      {set("/made_from/options/--seed", "2"), "made_from: fingerprint: is"},
      {erase("/made_from/options", "--seed"), "made_from: fingerprint: is"},
      {set("/made_from/options/--seed", 2), "made_from: is not a record"},
      {set("/devices/0/device", 1), "devices[0].device: is 1"},
      {set("/devices/0/peak_memory", nullptr), "devices[0].peak_memory: expected a number"},
      {set("/devices/0/subtasks/2/end", good["devices"][0]["subtasks"][2]["end"].get<double>() + 1),
       "devices[0].subtasks[2].end"},
      {[](ordered_json& d) { d["devices"][0]["subtasks"].erase(0); }, "devices[0].subtasks: has 23 entries, but device 0 runs 24"},
      {[](ordered_json& d) { d["devices"][0]["subtasks"][1] = d["devices"][0]["subtasks"][0]; },
       "devices[0].subtasks[1]: is actor replica 0 micro_batch 0 stage 0 F again"},
      {[](ordered_json& d) { std::swap(d["devices"][0]["subtasks"][0], d["devices"][0]["subtasks"][1]); },
       "but the instructions compute"},
      {[](ordered_json& d) { d["devices"][0]["subtasks"][0] = d["devices"][1]["subtasks"][0]; },
       "a subtask of device 1, not 0"},
      {erase("/spec/models/0", "replicas"), "spec.models[0].replicas: missing"},
      {erase("/spec", "p2p_time"), "spec.p2p_time: missing"},
      {set("/spec/models/0/fwd", 1e300), "spec.models[0].fwd"},
      {set("/spec/models/0/tp", 2), "spec.models[0].tp: unknown key"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ordered_json doc = good;
    cases[i].first(doc);
    const std::string why = refusal(doc);
    BOOST_TEST_CONTEXT("case " << i << ": " << cases[i].second) {
      BOOST_TEST(why.find("s.json") != std::string::npos, why);
      BOOST_TEST(why.find(cases[i].second) != std::string::npos, why);
    }
  }
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
