// Generation's prefill is costed from the KV-cache path's table, the other
// forward passes from the packed forward's; generation alone pays for sampling.
#define BOOST_TEST_MODULE plan_cost_model
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "plan/analytic_profile.hpp"
#include "plan/cost_model.hpp"

using namespace braid::plan;

namespace {

std::string fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/plan/" + name; }

struct Setup {
  Experiment exp = load_experiment(fixture("ppo-tiny.json"));
  Cluster cluster = load_cluster(fixture("cluster-1x2.json"));
  Profile profile;
  Setup() {
    std::vector<ModelShape> shapes;
    for (const auto& m : exp.models) shapes.push_back(m.shape);
    profile = analytic_profile(hardware_preset("h100"), shapes);
  }
  ModelProfile& actor() {
    for (auto& m : profile.models) {
      if (m.shape.same_as(exp.models[0].shape)) return m;
    }
    throw std::logic_error("no actor entry");
  }
};

const Call kGen{"actor_gen", "actor", CallKind::generate};
const Call kRef{"ref_inf", "ref", CallKind::inference};
const Mesh kMesh{0, 2};
const Strategy kStrategy{.dp = 2, .tp = 1, .pp = 1, .micro = 1};

}  // namespace

BOOST_AUTO_TEST_CASE(a_slower_prefill_table_lengthens_generation_only) {
  Setup base, slow;
  for (double& v : slow.actor().layer_prefill.v) v *= 2;
  const CostModel a(base.exp, base.profile, base.cluster), b(slow.exp, slow.profile, slow.cluster);
  const GenTimeline ga = a.gen_timeline(kMesh, kStrategy), gb = b.gen_timeline(kMesh, kStrategy);
  // One micro-batch of 32 prompts x 128 tokens per replica through every layer: the
  // difference is one more layer_fwd per layer at that point, nothing else.
  const ModelProfile& m = base.actor();
  const double extra = static_cast<double>(m.shape.layers) * m.layer_fwd.at(32 * 128, 128);
  BOOST_TEST(gb.prefill - ga.prefill == extra, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(gb.end - gb.prefill == ga.end - ga.prefill, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(b.estimate(kGen, kMesh, kStrategy).time > a.estimate(kGen, kMesh, kStrategy).time);
  // The reference model shares the actor's entry; its inference reads layer_fwd.
  BOOST_TEST(b.estimate(kRef, kMesh, kStrategy).time == a.estimate(kRef, kMesh, kStrategy).time);
}

BOOST_AUTO_TEST_CASE(a_profile_without_the_prefill_table_prefills_at_layer_fwd) {
  Setup with, without;
  without.actor().layer_prefill = {};
  const CostModel a(with.exp, with.profile, with.cluster), b(without.exp, without.profile, without.cluster);
  BOOST_TEST(b.gen_timeline(kMesh, kStrategy).prefill == a.gen_timeline(kMesh, kStrategy).prefill);
  BOOST_TEST(b.gen_timeline(kMesh, kStrategy).prefill > 0);
}

// Sampling is paid once after the prefill (each prompt's first token) and once per
// decode step, at the number of rows still generating; a profile without the table
// (older files) samples for free.
BOOST_AUTO_TEST_CASE(the_sampling_table_adds_one_draw_per_step) {
  Setup with, without;
  without.actor().sample = {};
  ModelProfile& m = with.actor();
  m.sample.x = {1, 1024};
  m.sample.v = {1e-3, 1e-3};  // a flat millisecond per step, whatever the rows
  const CostModel a(with.exp, with.profile, with.cluster), b(without.exp, without.profile, without.cluster);
  const GenTimeline ga = a.gen_timeline(kMesh, kStrategy), gb = b.gen_timeline(kMesh, kStrategy);
  BOOST_TEST(ga.prefill - gb.prefill == 1e-3, boost::test_tools::tolerance(1e-9));
  double steps = 0;
  for (const auto& blk : ga.blocks) steps += blk.remaining > 0 ? blk.steps : 0;
  BOOST_TEST(steps > 0);
  BOOST_TEST((ga.end - ga.prefill) - (gb.end - gb.prefill) == steps * 1e-3, boost::test_tools::tolerance(1e-6));
  // Inference samples nothing.
  BOOST_TEST(a.estimate(kRef, kMesh, kStrategy).time == b.estimate(kRef, kMesh, kStrategy).time);
}
