// The whole-iteration model's pieces: processor sharing over lanes of tasks
// (plan/run_model.hpp), shard completion from the response lengths, and the host costs of
// a profile (plan/host_costs.hpp) through its file form.
#define BOOST_TEST_MODULE plan_run_model
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "plan/analytic_profile.hpp"
#include "plan/run_model.hpp"
#include "tests/plan/shapes.hpp"
#include "tests/common/input_error.hpp"

using namespace braid::plan;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(threads_beyond_the_cores_share_them) {
  // Two single-thread tasks of 1 s in two lanes: side by side on 2 cores, each at half a
  // core on one (both end at 2 s), and a third thread on 2 cores slows all three to 2/3.
  std::vector<Task> t;
  add(t, {.name = "a", .lane = 0, .work = 1});
  add(t, {.name = "b", .lane = 1, .work = 1});
  BOOST_TEST(simulate_shared(t, 2).makespan == 1.0, tt::tolerance(1e-12));
  const Timeline one = simulate_shared(t, 1);
  BOOST_TEST(one.end[0] == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(one.end[1] == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(one.stretch(t, {0, 1}) == 2.0, tt::tolerance(1e-12));
  add(t, {.name = "c", .lane = 2, .work = 1});
  BOOST_TEST(simulate_shared(t, 2).makespan == 1.5, tt::tolerance(1e-12));
  // An MPI job's ranks count as its threads: 4 ranks on 2 cores take twice their work.
  std::vector<Task> job;
  add(job, {.name = "ranks", .work = 0.5, .threads = 4});
  BOOST_TEST(simulate_shared(job, 2).makespan == 1.0, tt::tolerance(1e-12));
  BOOST_TEST(simulate_shared(job, 0).makespan == 0.5, tt::tolerance(1e-12));  // cores unknown: no sharing
}

BOOST_AUTO_TEST_CASE(lanes_run_in_order_and_wait_for_their_inputs) {
  // generate (lane 0): start (a wait, no CPU) then two shards; score (lane 1): its own
  // start, then each shard once it is written.
  std::vector<Task> t;
  const int g0 = add(t, {.name = "gen start", .lane = 0, .work = 0.5, .threads = 0});
  const int g1 = add(t, {.name = "gen shard 0", .lane = 0, .work = 1, .after = {g0}});
  const int g2 = add(t, {.name = "gen shard 1", .lane = 0, .work = 1});
  const int s0 = add(t, {.name = "score start", .lane = 1, .work = 0.2, .threads = 0});
  const int s1 = add(t, {.name = "score shard 0", .lane = 1, .work = 0.3, .after = {g1}});
  const int s2 = add(t, {.name = "score shard 1", .lane = 1, .work = 0.3, .after = {g2}});
  const Timeline tl = simulate_shared(t, 2);
  BOOST_TEST(tl.start[g1] == 0.5, tt::tolerance(1e-12));
  BOOST_TEST(tl.end[s0] == 0.2, tt::tolerance(1e-12));   // waits use no core and overlap
  BOOST_TEST(tl.start[s1] == 1.5, tt::tolerance(1e-12));  // once shard 0 is written
  BOOST_TEST(tl.start[s2] == 2.5, tt::tolerance(1e-12));
  BOOST_TEST(tl.makespan == 2.8, tt::tolerance(1e-12));
  // On one core the scoring of shard 0 and the generation of shard 1 share it.
  const Timeline shared = simulate_shared(t, 1);
  BOOST_TEST(shared.end[s1] == 2.1, tt::tolerance(1e-12));
  BOOST_TEST(shared.makespan == 3.1, tt::tolerance(1e-12));
  // A task may only wait on an earlier one.
  t[0].after = {3};
  BOOST_CHECK_THROW(simulate_shared(t, 2), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(shards_end_with_their_longest_sample) {
  // 64 samples in flight at once, lengths 1..64: the 4 shards of 16 end at order
  // statistics of maxima of 16 draws, late in the call, the last with the call.
  std::vector<int> lengths;
  for (int i = 1; i <= 64; ++i) lengths.push_back(i);
  const auto all = shard_end_fractions(lengths, 64, 16, 64);
  BOOST_TEST(all.size() == 4u);
  BOOST_TEST(all.back() == 1.0);
  for (std::size_t k = 1; k < all.size(); ++k) BOOST_TEST(all[k] >= all[k - 1]);
  BOOST_TEST(all.front() > 0.8);  // a maximum of 16 draws is near the top
  // More samples than the batch holds: shards end one after another, evenly.
  const auto queued = shard_end_fractions(lengths, 64, 16, 8);
  BOOST_TEST(queued == (std::vector<double>{0.25, 0.5, 0.75, 1.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(a_generation_reaches_a_fraction_of_its_steps_in_time) {
  GenTimeline g;
  g.prefill = 1;
  g.blocks = {{0, 10, 8, 1.0}, {10, 10, 4, 3.0}};
  g.end = 4;
  BOOST_TEST(time_at_fraction(g, 0) == 1.0, tt::tolerance(1e-12));
  BOOST_TEST(time_at_fraction(g, 0.25) == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(time_at_fraction(g, 0.75) == 3.5, tt::tolerance(1e-12));
  BOOST_TEST(time_at_fraction(g, 1) == 4.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(host_costs_travel_with_the_profile) {
  const ModelShape s = braid::test::llama_shape("tiny", 64, 172, 2, 4, 259);
  Profile p = analytic_profile(hardware_preset("h100"), {s});
  BOOST_TEST(!p.host.measured());
  BOOST_TEST(!profile_to_json(p).contains("host"));
  p.host.cores = 2;
  p.host.process_start = 0.03;
  p.host.mpi_start = {{1, 2, 4}, {0.4, 0.45, 0.6}};
  p.host.touch_bandwidth = 4e9;
  p.host.file_latency = 0.002;
  p.host.write_bandwidth = 1e9;
  p.host.read_bandwidth = 2e9;
  const Profile q = profile_from_json(profile_to_json(p), "p.json");
  BOOST_TEST(q.host.cores == 2);
  BOOST_TEST(q.host.start(1, false) == 0.03, tt::tolerance(1e-9));
  BOOST_TEST(q.host.start(3, true) == 0.525, tt::tolerance(1e-9));  // between 2 and 4 ranks
  BOOST_TEST(q.host.read(2e9, 2) == 1.004, tt::tolerance(1e-9));
  BOOST_TEST(q.host.write(1e9) == 1.002, tt::tolerance(1e-9));
  BOOST_TEST(q.host.touch(8e9) == 2.0, tt::tolerance(1e-9));
  // A damaged block is refused, every field named.
  auto j = braid::json::parse(profile_to_json(p).dump());
  j["host"]["cores"] = 0;
  j["host"]["mpi_start_ms"]["values"] = {400, 450};
  j["host"]["touch_gbs"] = -1;
  const std::string what = braid::test::refusal([&] { profile_from_json(j, "p.json"); });
  BOOST_TEST(what.find("host.cores") != std::string::npos, what);
  BOOST_TEST(what.find("host.mpi_start_ms: ranks and values differ in length") != std::string::npos, what);
  BOOST_TEST(what.find("host.touch_gbs") != std::string::npos, what);
}
