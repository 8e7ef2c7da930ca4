// PPO's KL-penalised rewards and GAE, and GRPO's group advantages, against direct
// formulas written out the slow way; batches as spans over a sequence layout.
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "rl/gae.hpp"
#include "rl/grpo.hpp"

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace {

std::vector<float> random_floats(braid::Rng& rng, std::size_t n, double scale) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(scale * rng.normal());
  return v;
}

// A_t = Σ_{l >= 0} (γλ)^l δ_{t+l}: the definition of GAE, O(T²).
std::vector<double> direct_gae(const std::vector<double>& r, const std::vector<float>& v, double gamma,
                               double lambda) {
  const std::size_t n = r.size();
  std::vector<double> delta(n), a(n, 0.0);
  for (std::size_t t = 0; t < n; ++t) delta[t] = r[t] + gamma * (t + 1 < n ? v[t + 1] : 0.0) - v[t];
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t l = 0; t + l < n; ++l) a[t] += std::pow(gamma * lambda, double(l)) * delta[t + l];
  }
  return a;
}

// Two sequences as a sample shard lays them out: 5 tokens with a prompt of 2, then 3
// tokens with a prompt of 1.
const std::vector<std::int64_t> kOffsets{0, 5, 8};
const std::vector<std::int32_t> kPromptLen{2, 1};
const braid::rl::SequenceLayout kLayout{kOffsets, kPromptLen};

std::span<const float> response_of(const std::vector<float>& per_token, std::size_t i) {
  return std::span<const float>(per_token).subspan(kLayout.response_begin(i), kLayout.response_length(i));
}

}  // namespace

BOOST_AUTO_TEST_CASE(kl_penalised_rewards_put_the_reward_on_the_last_token) {
  const std::vector<float> actor{-1.0f, -2.0f, -0.5f}, ref{-1.5f, -1.0f, -0.5f};
  std::vector<double> r(3);
  braid::rl::kl_penalised_rewards(actor, ref, 2.0f, 0.1, braid::backend::KlEstimator::k1, r);
  BOOST_TEST(r[0] == -0.1 * 0.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r[1] == -0.1 * -1.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r[2] == 2.0, boost::test_tools::tolerance(1e-12));

  braid::rl::kl_penalised_rewards(actor, {}, 2.0f, 0.0, braid::backend::KlEstimator::k1, r);  // no reference needed without a penalty
  BOOST_TEST(r[0] == 0.0);
  BOOST_TEST(r[1] == 0.0);
  BOOST_TEST(r[2] == 2.0);
  BOOST_CHECK_THROW(braid::rl::kl_penalised_rewards(actor, {}, 2.0f, 0.1, braid::backend::KlEstimator::k1, r), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(gae_equals_the_sum_of_discounted_deltas) {
  braid::Rng rng(3);
  for (double gamma : {1.0, 0.99, 0.9}) {
    for (double lambda : {1.0, 0.95, 0.5, 0.0}) {
      const std::size_t n = 1 + rng.below(40);
      const auto vf = random_floats(rng, n, 1.0);
      const auto rf = random_floats(rng, n, 0.3);
      const std::vector<double> r(rf.begin(), rf.end());
      std::vector<float> adv(n), ret(n);
      braid::rl::gae(r, vf, gamma, lambda, adv, ret);
      const auto want = direct_gae(r, vf, gamma, lambda);
      for (std::size_t t = 0; t < n; ++t) {
        BOOST_TEST(adv[t] == want[t], boost::test_tools::tolerance(1e-4));
        BOOST_TEST(ret[t] == want[t] + vf[t], boost::test_tools::tolerance(1e-4));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(gae_with_gamma_and_lambda_one_is_reward_to_go_minus_value) {
  const std::vector<double> r{0.1, -0.2, 0.0, 1.5};
  const std::vector<float> v{0.3f, -0.7f, 0.2f, 0.9f};
  std::vector<float> adv(4), ret(4);
  braid::rl::gae(r, v, 1.0, 1.0, adv, ret);
  double to_go = 0;
  for (std::size_t t = 4; t-- > 0;) {
    to_go += r[t];
    BOOST_TEST(adv[t] == to_go - v[t], boost::test_tools::tolerance(1e-6));
    BOOST_TEST(ret[t] == to_go, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(gae_with_lambda_zero_is_the_one_step_td_error) {
  const std::vector<double> r{0.5, 0.25, -1.0};
  const std::vector<float> v{1.0f, 2.0f, 4.0f};
  std::vector<float> adv(3), ret(3);
  braid::rl::gae(r, v, 0.5, 0.0, adv, ret);
  BOOST_TEST(adv[0] == 0.5 + 0.5 * 2.0 - 1.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(adv[1] == 0.25 + 0.5 * 4.0 - 2.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(adv[2] == -1.0 - 4.0, boost::test_tools::tolerance(1e-6));  // nothing after the last token
}

BOOST_AUTO_TEST_CASE(ppo_advantages_fill_responses_only_and_keep_sequences_apart) {
  const std::vector<float> logprobs_actor{0, 0, -1.0f, -2.0f, -0.5f, 0, -0.3f, -0.4f};
  const std::vector<float> logprobs_ref{0, 0, -1.5f, -1.0f, -0.5f, 0, -0.3f, -0.2f};
  const std::vector<float> values{0, 0, 0.2f, 0.1f, -0.1f, 0, 0.5f, 0.4f};
  const std::vector<float> rewards{1.0f, -1.0f};
  std::vector<float> advantages(8, 7.0f), returns(8, 7.0f);  // prompt positions must become 0
  braid::rl::PpoAdvantageInputs in{.layout = kLayout, .logprobs_actor = logprobs_actor, .logprobs_ref = logprobs_ref,
                                   .values = values, .rewards = rewards};
  const braid::rl::PpoAdvantageOptions opt{.kl_coef = 0.1, .gamma = 0.9, .lambda = 0.8};
  const auto s = braid::rl::ppo_advantages(in, opt, advantages, returns);
  BOOST_TEST(s.response_tokens == 5);
  BOOST_TEST(s.mean_kl == (0.5 - 1.0 + 0.0 + 0.0 - 0.2) / 5, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(s.mean_reward == 0.0, boost::test_tools::tolerance(1e-9));

  for (std::size_t i = 0; i < kLayout.size(); ++i) {
    for (std::size_t t = kLayout.begin(i); t < kLayout.response_begin(i); ++t) {
      BOOST_TEST(advantages[t] == 0.0f);
      BOOST_TEST(returns[t] == 0.0f);
    }
    const auto actor = response_of(logprobs_actor, i), ref = response_of(logprobs_ref, i);
    const auto v = response_of(values, i);
    std::vector<double> r(actor.size());
    for (std::size_t t = 0; t < r.size(); ++t) r[t] = -0.1 * (double(actor[t]) - double(ref[t]));
    r.back() += rewards[i];
    const auto want = direct_gae(r, std::vector<float>(v.begin(), v.end()), 0.9, 0.8);
    const auto adv = response_of(advantages, i), ret = response_of(returns, i);
    for (std::size_t t = 0; t < want.size(); ++t) {
      BOOST_TEST(adv[t] == want[t], boost::test_tools::tolerance(1e-5));
      BOOST_TEST(ret[t] == want[t] + v[t], boost::test_tools::tolerance(1e-5));
    }
  }

  // Without a KL penalty the reference may be absent; a short array or a missing one is refused.
  in.logprobs_ref = {};
  BOOST_CHECK_NO_THROW(braid::rl::ppo_advantages(in, {.kl_coef = 0.0}, advantages, returns));
  BOOST_CHECK_THROW(braid::rl::ppo_advantages(in, opt, advantages, returns), std::invalid_argument);
  in.logprobs_ref = logprobs_ref;
  in.values = std::span<const float>(values).first(7);
  BOOST_CHECK_THROW(braid::rl::ppo_advantages(in, opt, advantages, returns), std::invalid_argument);
  in.values = values;
  in.rewards = std::span<const float>(rewards).first(1);
  BOOST_CHECK_THROW(braid::rl::ppo_advantages(in, opt, advantages, returns), std::invalid_argument);
  in.rewards = rewards;
  BOOST_CHECK_THROW(braid::rl::ppo_advantages(in, opt, advantages, std::span<float>(returns).first(5)),
                    std::invalid_argument);
  const std::vector<std::int32_t> long_prompt{2, 4};  // a prompt longer than its sequence
  in.layout.prompt_len = long_prompt;
  BOOST_CHECK_THROW(braid::rl::ppo_advantages(in, opt, advantages, returns), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(group_advantages_are_standardised_rewards) {
  const std::vector<float> r{1.0f, 0.0f, 0.0f, 3.0f};
  const auto a = braid::rl::group_advantages(r, {.eps = 0.0});
  // mean 1, population variance (0 + 1 + 1 + 4) / 4 = 1.5
  const double sd = std::sqrt(1.5);
  BOOST_TEST(a[0] == 0.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(a[1] == -1.0 / sd, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(a[3] == 2.0 / sd, boost::test_tools::tolerance(1e-6));
  double sum = 0, sq = 0;
  for (double x : a) { sum += x; sq += x * x; }
  BOOST_TEST(sum == 0.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(sq / 4 == 1.0, boost::test_tools::tolerance(1e-6));

  // A group that all scored alike learns nothing, and eps keeps it finite.
  for (double x : braid::rl::group_advantages(std::vector<float>{0.5f, 0.5f, 0.5f}, {})) BOOST_TEST(x == 0.0);
}

BOOST_AUTO_TEST_CASE(group_rewards_collect_groups_across_arrivals) {
  braid::rl::GroupRewards g(3);
  BOOST_TEST(g.group_of(7) == 2);
  BOOST_TEST(g.add(6, 1.0f));
  BOOST_TEST(g.add(8, 0.0f));
  BOOST_TEST(!g.add(8, 5.0f));  // a duplicate sample is refused, not counted twice
  BOOST_TEST(g.add(0, 2.0f));
  BOOST_TEST(!g.complete(2));
  BOOST_TEST((g.incomplete_groups() == std::vector<std::int64_t>{0, 2}));
  BOOST_CHECK_THROW(g.advantage(6, {}), std::logic_error);
  BOOST_TEST(g.add(7, 2.0f));
  BOOST_TEST(g.complete(2));
  BOOST_TEST((g.incomplete_groups() == std::vector<std::int64_t>{0}));
  const double sd = std::sqrt(2.0 / 3.0);
  BOOST_TEST(g.advantage(6, {.eps = 0.0}) == 0.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(g.advantage(7, {.eps = 0.0}) == 1.0 / sd, boost::test_tools::tolerance(1e-6));

  // Samples 7 (3 tokens, prompt 1) and 8 (2 tokens, all prompt).
  const std::vector<std::int64_t> offsets{0, 3, 5};
  const std::vector<std::int32_t> prompt_len{1, 2};
  const braid::rl::SequenceLayout layout{offsets, prompt_len};
  std::vector<float> a(5, 7.0f);
  braid::rl::broadcast_group_advantages(layout, std::vector<std::int64_t>{7, 8}, g, {.eps = 0.0}, a);
  BOOST_TEST(a[0] == 0.0f);
  BOOST_TEST(a[1] == 1.0 / sd, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(a[2] == 1.0 / sd, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(a[3] == 0.0f);  // a response of no tokens
  BOOST_TEST(a[4] == 0.0f);

  BOOST_CHECK_THROW(braid::rl::broadcast_group_advantages(layout, std::vector<std::int64_t>{7}, g, {.eps = 0.0}, a),
                    std::invalid_argument);
  BOOST_CHECK_THROW(braid::rl::broadcast_group_advantages(layout, std::vector<std::int64_t>{7, 1}, g, {.eps = 0.0}, a),
                    std::logic_error);  // group 0 is incomplete
}

// Whitening: response tokens of all sequences together to mean 0 and std 1; prompt
// positions keep what they held.
BOOST_AUTO_TEST_CASE(whitening_standardises_response_advantages_only) {
  std::vector<float> a{9, 9, 1.0f, 2.0f, 3.0f, 9, 4.0f, 10.0f};
  const auto be = braid::backend::make_cpu_backend(1);
  const auto w = braid::rl::whiten_advantages(*be, kLayout, a);
  BOOST_TEST(w.tokens == 5);
  BOOST_TEST(w.mean == 4.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(w.std == std::sqrt((9.0 + 4 + 1 + 0 + 36) / 5), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(a[0] == 9.0f);
  BOOST_TEST(a[1] == 9.0f);
  BOOST_TEST(a[5] == 9.0f);
  BOOST_TEST(a[2] == (1.0 - 4.0) / w.std, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(a[7] == (10.0 - 4.0) / w.std, boost::test_tools::tolerance(1e-5));
  double sum = 0, sq = 0;
  for (std::size_t t : {2, 3, 4, 6, 7}) {
    sum += a[t];
    sq += a[t] * a[t];
  }
  BOOST_TEST(std::abs(sum / 5) < 1e-6);
  BOOST_TEST(sq / 5 == 1.0, boost::test_tools::tolerance(1e-5));

  BOOST_CHECK_THROW(braid::rl::whiten_advantages(*be, kLayout, std::span<float>(a).first(7)), std::invalid_argument);
}

// RLOO's leave-one-out baseline and Dr. GRPO's unscaled one, against their definitions;
// a group of one keeps its reward under RLOO (no other sample to compare with).
BOOST_AUTO_TEST_CASE(leave_one_out_and_unscaled_group_advantages) {
  using braid::rl::Estimator;
  const std::vector<float> r{1.0f, 0.0f, 0.0f, 3.0f};
  const auto loo = braid::rl::group_advantages(r, {.estimator = Estimator::leave_one_out});
  for (std::size_t i = 0; i < r.size(); ++i) {
    double others = 0;
    for (std::size_t j = 0; j < r.size(); ++j) others += j == i ? 0.0 : r[j];
    BOOST_TEST(loo[i] == r[i] - others / 3.0, boost::test_tools::tolerance(1e-9));
  }
  const auto dr = braid::rl::group_advantages(r, {.estimator = Estimator::group, .std_normalize = false});
  for (std::size_t i = 0; i < r.size(); ++i) BOOST_TEST(dr[i] == r[i] - 1.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(braid::rl::group_advantages(std::vector<float>{2.5f}, {.estimator = Estimator::leave_one_out})[0] == 2.5);
  BOOST_CHECK_THROW(braid::rl::group_advantages(r, {.estimator = Estimator::gae}), std::invalid_argument);
  BOOST_TEST(braid::rl::rewards_all_equal(std::vector<float>{1.0f, 1.0f}));
  BOOST_TEST(!braid::rl::rewards_all_equal(std::vector<float>{1.0f, 0.0f}));
}

// REINFORCE++: no critic, λ = 1: A_t is the return-to-go of the KL-penalised rewards,
// Σ_{s≥t} γ^{s−t} r_s, and the return equals it; each KL estimator penalises as defined.
BOOST_AUTO_TEST_CASE(returns_to_go_of_kl_penalised_rewards) {
  braid::Rng rng(5);
  const auto actor = random_floats(rng, 8, 1.0), ref = random_floats(rng, 8, 1.0);
  const std::vector<float> rewards{0.5f, -1.0f};
  std::vector<float> a(8), ret(8);
  const double gamma = 0.9, beta = 0.2;
  for (const auto k : {braid::backend::KlEstimator::k1, braid::backend::KlEstimator::k2, braid::backend::KlEstimator::k3}) {
    braid::rl::ppo_advantages({.layout = kLayout, .logprobs_actor = actor, .logprobs_ref = ref, .values = {},
                               .rewards = rewards},
                              {.kl_coef = beta, .gamma = gamma, .lambda = 1.0, .kl_estimator = k}, a, ret);
    for (std::size_t i = 0; i < 2; ++i) {
      const std::size_t r0 = kLayout.response_begin(i), n = kLayout.response_length(i);
      double kl_sum = 0;
      for (std::size_t t = 0; t < n; ++t) {
        double want = 0;
        for (std::size_t s = t; s < n; ++s) {
          const double d = double(actor[r0 + s]) - double(ref[r0 + s]);
          const double kl = k == braid::backend::KlEstimator::k1   ? d
                            : k == braid::backend::KlEstimator::k2 ? 0.5 * d * d
                                                                   : std::exp(-d) + d - 1.0;
          want += std::pow(gamma, double(s - t)) * (-beta * kl + (s + 1 == n ? rewards[i] : 0.0));
          if (t == 0) kl_sum += kl;
        }
        BOOST_TEST(a[r0 + t] == want, boost::test_tools::tolerance(1e-5));
        BOOST_TEST(ret[r0 + t] == a[r0 + t]);
      }
      BOOST_TEST(braid::rl::sequence_kl_penalty(response_of(actor, i), response_of(ref, i), beta, k) == beta * kl_sum,
                 boost::test_tools::tolerance(1e-9));
    }
  }
}
