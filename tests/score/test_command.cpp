// braid-score's flag combinations: what they mean, and which are refused by name.
#define BOOST_TEST_MODULE score_command
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "score/command.hpp"

#include <string>

using braid::score::CommandOptions;

namespace {

CommandOptions ppo() {
  CommandOptions o;
  o.inputs = {"gen-00000.h5"};
  o.out_dir = "out";
  o.critic = "critic.h5";
  o.reward_rule = "digits";
  return o;
}

void expect_usage_error(const CommandOptions& o, const std::string& names) {
  try {
    braid::score::settings_from(o);
    BOOST_ERROR("accepted; expected an error naming " << names);
  } catch (const braid::UsageError& e) {
    BOOST_TEST(std::string(e.what()).find(names) != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(kl_coef_defaults_to_the_penalty_only_with_a_reference) {
  CommandOptions o = ppo();
  BOOST_TEST(braid::score::settings_from(o).kl_coef == 0.0);
  o.ref = "ref.h5";
  BOOST_TEST(braid::score::settings_from(o).kl_coef == braid::score::kDefaultKlCoef);
  o.kl_coef = 0.2;
  BOOST_TEST(braid::score::settings_from(o).kl_coef == 0.2);
  o.ref.clear();
  o.kl_coef = 0.0;  // an explicit 0 without a reference is fine
  BOOST_TEST(braid::score::settings_from(o).kl_coef == 0.0);
}

BOOST_AUTO_TEST_CASE(impossible_combinations_are_refused_by_name) {
  CommandOptions o = ppo();
  o.kl_coef = 0.1;
  expect_usage_error(o, "--kl-coef 0.1 needs --ref");
  o = ppo();
  o.critic.clear();
  expect_usage_error(o, "--critic");
  o = ppo();
  o.reward = "rm.h5";
  expect_usage_error(o, "--reward-rule");
  o = ppo();
  o.reward_rule.clear();
  expect_usage_error(o, "--reward");
  o = ppo();
  o.inputs = {"-", "gen-00000.h5"};
  expect_usage_error(o, "'-'");
}

BOOST_AUTO_TEST_CASE(grpo_needs_no_critic_and_takes_no_kl_penalty_here) {
  CommandOptions o = ppo();
  o.algorithm = "grpo";
  o.critic.clear();
  o.ref = "ref.h5";
  auto s = braid::score::settings_from(o);
  BOOST_TEST((s.algorithm == braid::score::Algorithm::grpo));
  BOOST_TEST(s.kl_coef == 0.0);
  // The KL term of GRPO lives in braid-train's loss, and it has no critic: either option
  // here would be ignored, so it is refused.
  o.kl_coef = 0.3;
  expect_usage_error(o, "leave out --kl-coef here");
  o.kl_coef.reset();
  o.critic = "critic.h5";
  expect_usage_error(o, "leave out --critic critic.h5");
}
