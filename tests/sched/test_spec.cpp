// Reading schedspecs: what is accepted, what is refused and how it is said.
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "sched/problem.hpp"

using namespace braid::sched;

namespace {

const char* kGood = R"({"format": "braid.schedspec", "version": 1, "devices": 8,
 "models": [
   {"name": "actor",  "stages": 8, "replicas": 1, "micro_batches": 16, "fwd": 5, "bwd": 10, "act_mem": 1.95},
   {"name": "critic", "stages": 4, "replicas": 2, "micro_batches": 8,  "fwd": 4, "bwd": 8,  "act_mem": 2.0}
 ], "mem_capacity": null, "p2p_time": 0})";

std::string refusal(const std::string& text) {
  try {
    parse_schedspec(text, "spec.json");
  } catch (const braid::InputError& e) {
    return e.what();
  }
  return "";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_the_issue_example) {
  const SchedSpec s = parse_schedspec(kGood, "spec.json");
  BOOST_REQUIRE_EQUAL(s.models.size(), 2u);
  BOOST_CHECK(s.models[0].forward);
  BOOST_CHECK(!s.models[1].forward);  // mirrored by default
  BOOST_CHECK(!s.mem_capacity);
  const Problem p = build_problem(s);
  BOOST_CHECK_EQUAL(p.per_device, 2 * (16 + 8));
  // Critic replica 1 occupies devices 4..7, its stage 0 on device 7.
  BOOST_CHECK_EQUAL(p.device_of(1, 1, 0), 7);
  BOOST_CHECK_EQUAL(p.device_of(1, 0, 3), 0);
}

BOOST_AUTO_TEST_CASE(refuses_what_cannot_be_scheduled) {
  BOOST_CHECK_NE(refusal(with(kGood, R"("stages": 4)", R"("stages": 3)")).find("models[1].replicas"), std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, R"("micro_batches": 8)", R"("micro_batches": 7)")).find("global batch"),
                 std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, R"("fwd": 4)", R"("fwd": [1, 2])")).find("models[1].fwd"), std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, R"("fwd": 5)", R"("fwd": -1)")).find("models[0].fwd"), std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, R"("p2p_time")", R"("p2p_tme")")).find("p2p_time"), std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, "braid.schedspec", "braid.profile")).find("format"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_fusion_factors_with_a_common_factor) {
  std::string text = with(kGood, R"("devices": 8)", R"("devices": 16)");
  text = with(text, R"("stages": 8, "replicas": 1, "micro_batches": 16)", R"("stages": 8, "replicas": 2, "micro_batches": 8)");
  text = with(text, R"("stages": 4, "replicas": 2, "micro_batches": 8)", R"("stages": 4, "replicas": 4, "micro_batches": 4)");
  BOOST_CHECK_MESSAGE(refusal(text).find("share the factor 2") != std::string::npos, refusal(text));
}

BOOST_AUTO_TEST_CASE(merges_stages_for_a_tp_mismatch) {
  // Actor tp 2 over 4 stages; critic tp 1 over 8 stages merges pairwise to 4.
  const char* text = R"({"format": "braid.schedspec", "version": 1, "devices": 4,
   "models": [
     {"name": "actor", "stages": 4, "micro_batches": 4, "fwd": 5, "bwd": 10, "act_mem": 2, "tp": 2},
     {"name": "critic", "stages": 8, "micro_batches": 4, "fwd": [1,2,3,4,5,6,7,8], "bwd": 2, "act_mem": 1, "tp": 1}
   ]})";
  const SchedSpec s = parse_schedspec(text, "spec.json");
  BOOST_REQUIRE_EQUAL(s.models[1].stages, 4);
  BOOST_CHECK_EQUAL(s.models[1].fwd[0], 3.0);
  BOOST_CHECK_EQUAL(s.models[1].fwd[3], 15.0);
  BOOST_CHECK_EQUAL(s.models[1].bwd[2], 4.0);
  std::string odd = with(text, R"("stages": 8)", R"("stages": 7)");
  odd = with(odd, "[1,2,3,4,5,6,7,8]", "1");
  BOOST_CHECK_NE(refusal(odd).find("divisible by 2"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(takes_the_fused_training_spec_out_of_a_plan) {
  const std::string plan = std::string(R"({"format": "braid.plan", "version": 1, "calls": [{"name": "actor_train"}], "fusion": {"intra_stage": {"schedspec": )") +
                           kGood + "}}}";
  const SchedSpec s = parse_schedspec(plan, "plan.json");
  BOOST_REQUIRE_EQUAL(s.models.size(), 2u);
  BOOST_CHECK_EQUAL(s.devices, 8);
  BOOST_CHECK_EQUAL(s.models[1].micro_batches, 8);

  const std::string unfused = refusal(R"({"format": "braid.plan", "version": 1, "calls": [{}], "fusion": {"inter_stage": {}}})");
  BOOST_CHECK_NE(unfused.find("spec.json: fusion.intra_stage.schedspec: missing"), std::string::npos);
}

// A plan is checked as braid-meshplan writes it before its spec is taken: version,
// keys and a non-empty calls list; a format that is not a string is named, not a crash.
BOOST_AUTO_TEST_CASE(checks_the_plan_around_the_spec) {
  const std::string tail = std::string(R"(, "calls": [{}], "fusion": {"intra_stage": {"schedspec": )") + kGood + "}}}";
  for (const auto& [version, problem] : std::vector<std::pair<std::string, std::string>>{
           {"2", "spec.json: version: is 2, this braid reads versions up to 1"},
           {"\"x\"", "spec.json: version: expected an integer"},
           {"-1", "spec.json: version: is -1, must be >= 1"}}) {
    const std::string text = R"({"format": "braid.plan", "version": )" + version + tail;
    BOOST_TEST_INFO(version);
    BOOST_CHECK_NE(refusal(text).find(problem), std::string::npos);
  }
  const std::string unknown =
      refusal(std::string(R"({"format": "braid.plan", "version": 1, "cals": [], "calls": [{}], "fusion": {"intra_stage": {"schedspec": )") +
              kGood + "}}}");
  BOOST_CHECK_NE(unknown.find("cals: unknown key (did you mean \"calls\"?)"), std::string::npos);
  const std::string empty =
      refusal(std::string(R"({"format": "braid.plan", "version": 1, "calls": [], "fusion": {"intra_stage": {"schedspec": )") +
              kGood + "}}}");
  BOOST_CHECK_NE(empty.find("spec.json: calls: has 0 items, expected at least 1"), std::string::npos);

  BOOST_CHECK_NE(refusal(R"({"format": 7, "version": 1, "calls": [{}]})").find("spec.json: format: expected a string"),
                 std::string::npos);
  BOOST_CHECK_NE(refusal(with(kGood, "\"braid.schedspec\"", "1")).find("spec.json: format: expected a string"),
                 std::string::npos);
}
