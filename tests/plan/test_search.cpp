// On clusters up to 8 devices, Metropolis–Hastings finds a plan as cheap as
// enumerating every plan (issue 5's done-when), with and without fusion.
#define BOOST_TEST_MODULE plan_search
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "plan/analytic_profile.hpp"
#include "plan/search.hpp"

using namespace braid::plan;

namespace {

std::string fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/plan/" + name; }

struct Case {
  std::string experiment, cluster;
  int max_micro;
  bool fusion;
};

void check(const Case& k) {
  const Experiment e = load_experiment(fixture(k.experiment));
  const Cluster cl = load_cluster(fixture(k.cluster));
  std::vector<ModelShape> shapes;
  for (const auto& m : e.models) shapes.push_back(m.shape);
  const Profile prof = analytic_profile(hardware_preset("h100"), shapes);
  CostModel cm(e, prof, cl);
  cm.set_max_micro(k.max_micro);
  const PlanSpace space(cm, {k.fusion, k.fusion, std::nullopt});
  const SearchResult exact = exhaustive_search(space, false);
  BOOST_TEST(exact.evaluated == static_cast<long>(space.plan_count()));
  SearchOptions o;
  o.method = "mh";
  o.max_iterations = 20000;
  o.time_limit_s = 60;
  o.progress = false;
  const SearchResult mh = search_plan(space, o);
  BOOST_TEST_INFO(k.experiment << " on " << k.cluster << (k.fusion ? " fused" : " serial"));
  BOOST_TEST(mh.eval.cost == exact.eval.cost, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(!exact.eval.oom);
  // Far fewer plans costed than exist: the search did not enumerate in disguise.
  BOOST_TEST(mh.evaluated < exact.evaluated);
}

}  // namespace

BOOST_AUTO_TEST_CASE(ppo_on_two_devices) {
  check({"ppo-tiny.json", "cluster-1x2.json", 2, true});
  check({"ppo-tiny.json", "cluster-1x2.json", 2, false});
}

BOOST_AUTO_TEST_CASE(grpo_on_four_devices) {
  check({"grpo-tiny.json", "cluster-1x4.json", 2, true});
  check({"grpo-tiny.json", "cluster-1x4.json", 2, false});
}

BOOST_AUTO_TEST_CASE(grpo_on_eight_devices) { check({"grpo-tiny.json", "cluster-1x8.json", 1, true}); }
