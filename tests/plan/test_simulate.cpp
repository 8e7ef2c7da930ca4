// The workflow simulator and the stage-fusion models.
#define BOOST_TEST_MODULE plan_simulate
#include <boost/test/unit_test.hpp>

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
FusedModel uniform(const char* name, int stages, int replicas, int micro, double f, double b) {
  return {name, stages, replicas, micro, std::vector<double>(stages, f), std::vector<double>(stages, b),
          std::vector<double>(stages, 0.0)};
}
}  // namespace

BOOST_AUTO_TEST_CASE(one_model_alone_is_bound_by_its_1f1b_time) {
  // N stages, M micro-batches, f + b per stage: 1F1B takes (M + N - 1)(f + b),
  // and the first stage's bound (arrival 0, work M(f+b), tail (N-1)b) is below it.
  const auto m = uniform("a", 4, 1, 8, 1.0, 2.0);
  const double lb = fused_lower_bound({m, uniform("none", 4, 1, 0, 0.0, 0.0)}, 4, 0.0);
  // Last stage: arrival 3f, work 8*3, tail 3b = 3 + 24 + 6 = 33 = (M + N - 1)(f+b) = 11*3.
  BOOST_TEST(lb == 33.0);
}

BOOST_AUTO_TEST_CASE(two_mirrored_models_fill_each_others_bubbles) {
  // Chimera's case: the same model twice in opposite directions. Alone each
  // takes (M + N - 1)(f + b); fused the bound is the per-stage work plus the
  // shorter of the two heads and tails, well below twice the serial time.
  const auto a = uniform("actor", 4, 1, 4, 1.0, 2.0), c = uniform("critic", 4, 1, 4, 1.0, 2.0);
  const double lb = fused_lower_bound({a, c}, 4, 0.0);
  const double serial = 2 * (4 + 4 - 1) * 3.0;  // 42
  // Stage j holds actor stage j and critic stage 3-j: the shorter head is
  // min(j, 3-j) f, the shorter tail min(j, 3-j) b, the work 2*4*(f+b) = 24.
  // Stages 1 and 2 bind: 1 + 24 + 2 = 27 (each model alone: 3 + 12 + 6 = 21).
  BOOST_TEST(lb == 27.0);
  BOOST_TEST(lb < serial);
}

BOOST_AUTO_TEST_CASE(point_to_point_time_lengthens_heads_and_tails) {
  const auto a = uniform("actor", 4, 1, 8, 1.0, 2.0);
  const double without = fused_lower_bound({a, uniform("none", 4, 1, 0, 0.0, 0.0)}, 4, 0.0);
  const double with = fused_lower_bound({a, uniform("none", 4, 1, 0, 0.0, 0.0)}, 4, 0.5);
  // Last stage: three hops in and three hops back out.
  BOOST_TEST(with == without + 6 * 0.5);
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
