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
  BOOST_TEST(braid::score::settings_from(o).kl_coef == braid::score::default_kl_coef("ppo"));
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

BOOST_AUTO_TEST_CASE(grpo_needs_no_critic_and_puts_a_kl_penalty_in_the_reward_only_when_asked) {
  CommandOptions o = ppo();
  o.algorithm = "grpo";
  o.critic.clear();
  o.ref = "ref.h5";
  auto s = braid::score::settings_from(o);
  BOOST_TEST(s.algorithm == "grpo");
  BOOST_TEST(s.grouped());
  BOOST_TEST(s.std_normalize);
  BOOST_TEST(s.kl_coef == 0.0);  // GRPO's KL term lives in braid-train's loss by default
  o.kl_coef = 0.3;               // ... or, asked, in the reward
  BOOST_TEST(braid::score::settings_from(o).kl_coef == 0.3);
  // It has no critic: --critic would be ignored, so it is refused.
  o.kl_coef.reset();
  o.critic = "critic.h5";
  expect_usage_error(o, "leave out --critic critic.h5");
}

// Each algorithm's preset: its estimator, the std normalisation, the reward KL with a
// reference, DAPO's overlong shaping; the switches change them; bad ones are refused.
BOOST_AUTO_TEST_CASE(algorithm_presets_and_their_switches) {
  using braid::rl::Estimator;
  CommandOptions o = ppo();
  o.critic.clear();
  o.ref = "ref.h5";
  const auto with = [&](const char* algorithm) {
    o.algorithm = algorithm;
    return braid::score::settings_from(o);
  };
  BOOST_TEST((with("rloo").estimator == Estimator::leave_one_out));
  BOOST_TEST(with("rloo").kl_coef == 0.01);
  BOOST_TEST((with("reinforce++").estimator == Estimator::returns_to_go));
  BOOST_TEST(!with("reinforce++").grouped());
  BOOST_TEST(!with("dr-grpo").std_normalize);
  BOOST_TEST(!with("reinforce++-baseline").std_normalize);
  BOOST_TEST(with("dapo").overlong_buffer_for(20) == 4);  // 20% of max_new_tokens
  BOOST_TEST(with("gspo").overlong_buffer_for(20) == 0);
  o.std_normalize = true;
  BOOST_TEST(with("dr-grpo").std_normalize);
  o.algorithm = "reinforce++";
  expect_usage_error(o, "--norm-by-std");
  o.std_normalize.reset();
  o.overlong_buffer = 3;
  BOOST_TEST(with("grpo").overlong_buffer_for(20) == 3);
  o.overlong_buffer.reset();
  o.kl_estimator = "k4";
  expect_usage_error(o, "--kl-estimator");
  o.kl_estimator = "k3";
  BOOST_TEST((with("rloo").kl_estimator == braid::backend::KlEstimator::k3));
  o.algorithm = "grpo";
  expect_usage_error(o, "--kl-estimator");   // grpo's reward has no KL penalty to estimate (its coefficient is 0)
  o.kl_estimator = "k1";
  o.options_given = {"--kl-estimator"};      // given at its default value: still not read
  expect_usage_error(o, "--kl-estimator k1: the KL coefficient is 0");
  o.options_given.clear();
  o.algorithm = "sppo";
  expect_usage_error(o, "--algorithm");
  o.algorithm = "rloo";
  o.ref.clear();
  BOOST_TEST(with("rloo").kl_coef == 0.0);  // no reference: no penalty
}

// DAPO's soft overlong punishment: nothing up to max_new_tokens − buffer, then linear to
// −penalty at max_new_tokens.
BOOST_AUTO_TEST_CASE(overlong_reward_falls_linearly_over_the_buffer) {
  using braid::score::overlong_reward;
  BOOST_TEST(overlong_reward(16, 20, 4, 1.0) == 0.0);
  BOOST_TEST(overlong_reward(17, 20, 4, 1.0) == -0.25);
  BOOST_TEST(overlong_reward(20, 20, 4, 1.0) == -1.0);
  BOOST_TEST(overlong_reward(20, 20, 4, 0.5) == -0.5);
  BOOST_TEST(overlong_reward(25, 20, 4, 1.0) == -1.0);
  BOOST_TEST(overlong_reward(20, 20, 0, 1.0) == 0.0);
}
