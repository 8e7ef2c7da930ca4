// The workflow simulator and the stage-fusion models.
#define BOOST_TEST_MODULE plan_simulate
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "plan/analytic_profile.hpp"
#include "plan/fusion.hpp"
#include "plan/simulate.hpp"

using namespace braid::plan;

BOOST_AUTO_TEST_CASE(calls_on_overlapping_meshes_serialise_and_disjoint_ones_overlap) {
  // gen on all 4 devices, then two inferences: on disjoint halves they run
  // together; on overlapping meshes one waits for the other.
  std::vector<SimNode> g{{5, {0, 4}, {}}, {2, {0, 2}, {0}}, {3, {2, 2}, {0}}, {1, {0, 4}, {1, 2}}};
  auto r = simulate(g, 4);
  BOOST_TEST(r.start[1] == 5.0);
  BOOST_TEST(r.start[2] == 5.0);
  BOOST_TEST(r.makespan == 9.0);
  g[2].mesh = {1, 2};
  r = simulate(g, 4);
  BOOST_TEST(r.start[2] == 7.0);
  BOOST_TEST(r.makespan == 11.0);
}

BOOST_AUTO_TEST_CASE(independent_calls_wait_for_the_mesh_in_ready_order) {
  // Two parentless nodes on one device: the second starts when the first ends.
  std::vector<SimNode> g{{4, {0, 1}, {}}, {1, {0, 1}, {}}, {1, {1, 1}, {}}};
  const auto r = simulate(g, 2);
  BOOST_TEST(r.start[1] == 4.0);
  BOOST_TEST(r.start[2] == 0.0);
}

namespace {
std::string fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/plan/" + name; }
}  // namespace

BOOST_AUTO_TEST_CASE(fused_training_beats_serial_and_respects_total_work) {
  const Experiment e = load_experiment(fixture("ppo-tiny.json"));
  const Cluster cl = load_cluster(fixture("cluster-1x8.json"));
  std::vector<ModelShape> shapes;
  for (const auto& m : e.models) shapes.push_back(m.shape);
  const Profile prof = analytic_profile(hardware_preset("h100"), shapes);
  const CostModel cm(e, prof, cl);
  const Mesh all{0, 8};
  const Strategy s{1, 1, 8, 4};  // 16 samples per step in 4 micro-batches of 4
  const Call at{"actor_train", "actor", CallKind::train}, ct{"critic_train", "critic", CallKind::train};
  const double ta = cm.estimate(at, all, s).time, tc = cm.estimate(ct, all, s).time;
  const IntraFusion f = intra_fusion(cm, all, s, s, ta + tc, 10e9, nullptr);
  BOOST_TEST(f.used);
  BOOST_TEST(f.fused < ta + tc);
  // No schedule beats the busiest device doing all its work without a gap.
  const auto sa = cm.train_stages("actor", 8, 1, 1, false, 4), sc = cm.train_stages("critic", 8, 1, 1, false, 4);
  double busiest = 0;
  for (int k = 0; k < 8; ++k) busiest = std::max(busiest, 4 * (sa.fwd[k] + sa.bwd[k] + sc.fwd[7 - k] + sc.bwd[7 - k]));
  BOOST_TEST(f.per_step_bound >= busiest * (1 - 1e-6));
  BOOST_TEST(f.schedspec["devices"] == 8);
  BOOST_TEST(f.schedspec["models"][1]["tp"] == 1);
  // Micro-batches of different sizes cannot share one fused pipeline.
  const IntraFusion g = intra_fusion(cm, all, s, Strategy{1, 1, 8, 2}, ta + tc, 10e9, nullptr);
  BOOST_TEST(!g.used);
}

BOOST_AUTO_TEST_CASE(inter_stage_fusion_overlaps_inference_with_the_tail) {
  // 100 samples; 80 done at t=10 when the migration happens, the tail ends at
  // 20 on m=1 of n=4 replicas. Inference alone takes 4 s on the whole mesh.
  GenTail t;
  t.r_t = 20;
  t.m = 1;
  t.t_migrate = 10;
  t.time = {10, 15, 20};
  t.completed = {80, 90, 100};
  t.gen_end = 20;
  const InterFusion f = best_inter_fusion({t}, 19.0, 4.0, 100, 4);
  BOOST_TEST(f.used);
  BOOST_TEST(f.serial == 23.0);
  // 3/4 of the mesh does 18.75 samples/s: by t=15 all 80, by 20 the next 10;
  // the last 0 .. 10 are done after 20 at the full rate (25/s): 20.4.
  BOOST_TEST(std::abs(f.fused - 20.4) < 1e-9);
  // A tail so slow that fusion loses keeps the serial plan.
  t.time = {10, 30, 40};
  t.gen_end = 40;
  const InterFusion g = best_inter_fusion({t}, 19.0, 4.0, 100, 4);
  BOOST_TEST(!g.used);
  BOOST_TEST(g.fused == 23.0);
}

// braid-meshplan --schedule compares the schedule's spec by hand: a value of the wrong
// type makes the specs differ (the lower bound is used) rather than a JSON type error.
BOOST_AUTO_TEST_CASE(schedspecs_of_the_wrong_shape_differ_without_throwing) {
  const auto spec = braid::json::parse(R"({"devices": 4, "models": [
      {"name": "actor", "replicas": 1, "micro_batches": 2, "fwd": [1, 2], "bwd": 6}]})");
  BOOST_TEST(same_schedspec(spec, spec));
  for (const char* other : {R"({"devices": "4", "models": []})",
                            R"({"devices": 4, "models": [{"name": 7, "replicas": 1, "micro_batches": 2, "fwd": 3, "bwd": 6}]})",
                            R"({"devices": 4, "models": [{"name": "actor", "replicas": 1, "micro_batches": 2, "fwd": ["x"], "bwd": 6}]})",
                            R"({"devices": 4, "models": [3]})"}) {
    BOOST_TEST_INFO(other);
    bool same = true;
    BOOST_CHECK_NO_THROW(same = same_schedspec(spec, braid::json::parse(other)));
    BOOST_TEST(!same);
  }
}
