// Truncated importance sampling: each response token's advantage is weighed by
// min(exp(proximal − behaviour), cap); prompt positions are untouched.
#include <boost/test/unit_test.hpp>

#include "rl/tis.hpp"

#include <cmath>
#include <vector>

BOOST_AUTO_TEST_CASE(tis_weighs_response_advantages_by_the_capped_ratio) {
  const std::vector<std::int64_t> offsets{0, 4};
  const std::vector<std::int32_t> prompt_len{1};
  const braid::rl::SequenceLayout layout{offsets, prompt_len};
  const std::vector<float> proximal{0, -1.0f, -1.0f, -0.5f}, behaviour{0, -1.2f, -0.9f, -2.5f};
  std::vector<float> adv{7.0f, 1.0f, -2.0f, 1.0f};
  const auto s = braid::rl::truncated_importance_sampling(layout, proximal, behaviour, 2.0, adv);
  BOOST_TEST(adv[0] == 7.0f);
  BOOST_TEST(adv[1] == std::exp(0.2), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(adv[2] == -2.0 * std::exp(-0.1), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(adv[3] == 2.0f);  // e^2 capped at 2
  BOOST_TEST(s.tokens == 3);
  BOOST_TEST(s.truncated == 1);
  BOOST_TEST(s.mean_weight == (std::exp(0.2) + std::exp(-0.1) + 2.0) / 3, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(s.max_abs_log_ratio == 2.0, boost::test_tools::tolerance(1e-6));
  BOOST_CHECK_THROW(braid::rl::truncated_importance_sampling(layout, proximal, behaviour, 0.0, adv),
                    std::invalid_argument);
  BOOST_CHECK_THROW(braid::rl::truncated_importance_sampling(layout, std::vector<float>(3), behaviour, 2.0, adv),
                    std::invalid_argument);
}
