// score/advantages.hpp: rl's advantage functions applied to a sample batch's arrays.
// The math is tested in tests/rl/test_advantages.cpp; here, that the adapter hands rl
// the right arrays, writes what it returns where a shard keeps it, and names what is missing.
#define BOOST_TEST_MODULE score_advantages
#include <boost/test/unit_test.hpp>

#include "score/advantages.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace {

braid::io::SampleBatch two_sequences() {
  braid::io::SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3, 4, 5}, 2, 0);
  b.add(std::vector<std::int32_t>{1, 6, 7}, 1, 1);
  b.logprobs_actor = std::vector<float>{0, 0, -1.0f, -2.0f, -0.5f, 0, -0.3f, -0.4f};
  b.logprobs_ref = std::vector<float>{0, 0, -1.5f, -1.0f, -0.5f, 0, -0.3f, -0.2f};
  b.values = std::vector<float>{0, 0, 0.2f, 0.1f, -0.1f, 0, 0.5f, 0.4f};
  b.reward = std::vector<float>{1.0f, -1.0f};
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ppo_advantages_of_a_batch_are_rl_advantages_of_its_arrays) {
  auto b = two_sequences();
  const braid::rl::PpoAdvantageOptions opt{.kl_coef = 0.1, .gamma = 0.9, .lambda = 0.8};
  const auto s = braid::score::ppo_advantages(b, opt);

  std::vector<float> advantages(b.token_count()), returns(b.token_count());
  const auto want = braid::rl::ppo_advantages({.layout = braid::score::layout_of(b),
                                               .logprobs_actor = *b.logprobs_actor,
                                               .logprobs_ref = *b.logprobs_ref,
                                               .values = *b.values,
                                               .rewards = *b.reward},
                                              opt, advantages, returns);
  BOOST_TEST(s.response_tokens == 5);
  BOOST_TEST(s.mean_kl == want.mean_kl);
  BOOST_TEST(s.mean_advantage == want.mean_advantage);
  BOOST_TEST((*b.advantages == advantages));
  BOOST_TEST((*b.returns == returns));
  BOOST_TEST((*b.advantages)[3] != 0.0f);  // a response token got an advantage
  BOOST_TEST(b.problems().empty());

  // Without the reference only a KL penalty fails; without values (REINFORCE++) V = 0:
  // with λ = 1 each advantage is the return-to-go, here the reward from every token.
  b.logprobs_ref.reset();
  BOOST_CHECK_NO_THROW(braid::score::ppo_advantages(b, {.kl_coef = 0.0}));
  BOOST_CHECK_THROW(braid::score::ppo_advantages(b, opt), std::invalid_argument);
  b.values.reset();
  braid::score::ppo_advantages(b, {.kl_coef = 0.0, .gamma = 1.0, .lambda = 1.0});
  BOOST_TEST((*b.advantages)[2] == 1.0f);
  BOOST_TEST((*b.advantages)[4] == 1.0f);
  BOOST_TEST((*b.advantages)[6] == -1.0f);
  BOOST_TEST((*b.advantages)[0] == 0.0f);
  try {
    b.reward.reset();
    braid::score::ppo_advantages(b, {.kl_coef = 0.0});
    BOOST_FAIL("advantages without rewards");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("/reward") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(grpo_advantages_of_a_batch_fill_advantages_and_returns_alike) {
  braid::rl::GroupRewards g(2);
  g.add(0, 1.0f);
  g.add(1, 0.0f);
  auto b = two_sequences();
  braid::score::group_advantages(b, g, {.eps = 0.0});
  const std::vector<float> want{0, 0, 1, 1, 1, 0, -1, -1};  // rewards 1 and 0: mean 0.5, std 0.5
  BOOST_TEST((*b.advantages == want));
  BOOST_TEST((*b.returns == want));
  BOOST_TEST(b.problems().empty());
}
