// The PPO, GRPO, value, pairwise and DPO losses (backend ops, backend/losses.hpp, on the CPU
// backend over host vectors): gradients against central finite differences, and the
// clipping cases where the gradient must vanish.
#define BOOST_TEST_MODULE train_losses
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "tests/model/grad_check.hpp"

#include <cmath>
#include <functional>
#include <vector>

using namespace braid;

namespace {

backend::Ops<float>& ops() {
  static const auto be = backend::make_cpu_backend(1);
  return be->ops<float>();
}

const float* or_null(std::span<const float> x) { return x.empty() ? nullptr : x.data(); }

struct PolicyIn {
  std::span<const float> logprob, old_logprob, advantages, weight, entropy, ref_logprob;
};
backend::PolicyLossSums policy_loss(const PolicyIn& in, const backend::PolicyLossOptions& opt, std::span<float> d_lp,
                                    std::span<float> d_ent, double scale = 1.0) {
  return ops().policy_loss(static_cast<std::int64_t>(in.logprob.size()),
                           {in.logprob.data(), in.old_logprob.data(), in.advantages.data(), in.weight.data(),
                            or_null(in.entropy), or_null(in.ref_logprob)},
                           opt, scale, d_lp.data(), d_ent.empty() ? nullptr : d_ent.data());
}

struct ValueIn {
  std::span<const float> values, old_values, returns, weight;
};
backend::ValueLossSums value_loss(const ValueIn& in, double clip, std::span<float> d, double scale = 1.0) {
  return ops().value_loss(static_cast<std::int64_t>(in.values.size()),
                          {in.values.data(), in.old_values.data(), in.returns.data(), in.weight.data()}, clip, scale,
                          d.data());
}

// Pairs as the reward-model objective lays them out: values [chosen..., rejected...].
backend::PairwiseLossSums pairwise_loss(std::span<const float> chosen, std::span<const float> rejected,
                                        std::span<float> d_chosen, std::span<float> d_rejected, double scale = 1.0) {
  const std::size_t n = chosen.size();
  std::vector<float> values(chosen.begin(), chosen.end()), d(2 * n);
  values.insert(values.end(), rejected.begin(), rejected.end());
  std::vector<std::int64_t> c(n), r(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = std::int64_t(i), r[i] = std::int64_t(n + i);
  const auto sums = ops().pairwise_loss(std::int64_t(n), values.data(), c.data(), r.data(), scale, d.data());
  std::copy(d.begin(), d.begin() + std::ptrdiff_t(n), d_chosen.begin());
  std::copy(d.begin() + std::ptrdiff_t(n), d.end(), d_rejected.begin());
  return sums;
}

// DPO over pairs of sequences with the given row offsets (2·pairs + 1 entries).
struct DpoIn {
  std::span<const float> logprob, ref_logprob, weight;
  std::span<const std::int64_t> offsets;
};
backend::DpoLossSums dpo_loss(const DpoIn& in, const backend::DpoLossOptions& opt, std::span<float> d,
                              double scale = 1.0) {
  return ops().dpo_loss(std::int64_t(in.offsets.size() / 2),
                        {in.logprob.data(), in.ref_logprob.data(), in.weight.data(), in.offsets.data()}, opt, scale,
                        d.data());
}

std::vector<float> normal(Rng& rng, std::size_t n, double sd, double mean = 0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(mean + sd * rng.normal());
  return v;
}

// Central difference of f in x[i], with x perturbed in place; h large enough that float
// inputs are not the limit (the losses sum in double).
double numeric(std::vector<float>& x, std::size_t i, const std::function<double()>& f, float h = 1e-2f) {
  return test::central_difference(x.data(), i, f, h);
}

void check_close(double analytic, double numeric_value, const std::string& what) {
  const double tol = 2e-3 * std::max(1.0, std::abs(numeric_value)) + 1e-4;
  BOOST_TEST(std::abs(analytic - numeric_value) <= tol, what << ": analytic " << analytic << " vs numeric " << numeric_value);
}

struct PolicyCase {
  std::vector<float> logprob, old_logprob, adv, weight, entropy, ref;
};

PolicyCase policy_case(std::size_t n, double spread) {
  Rng rng(11);
  PolicyCase c;
  c.old_logprob = normal(rng, n, 0.5, -2.0);
  c.logprob = c.old_logprob;
  for (auto& x : c.logprob) x += static_cast<float>(spread * rng.normal());
  c.adv = normal(rng, n, 1.0);
  c.entropy = normal(rng, n, 0.3, 2.0);
  c.ref = normal(rng, n, 0.5, -2.0);
  c.weight.assign(n, 1.0f / float(n - 2));
  c.weight[0] = c.weight[n - 1] = 0;  // rows that do not count
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(policy_loss_gradient_matches_finite_differences) {
  // Small ratios so that no row sits within h of a clip boundary; every KL estimator.
  for (const auto estimator : {backend::KlEstimator::k1, backend::KlEstimator::k2, backend::KlEstimator::k3}) {
  PolicyCase c = policy_case(24, 0.05);
  const backend::PolicyLossOptions opt{.clip_low = 0.2, .clip_high = 0.28, .entropy_coef = 0.01, .kl_coef = 0.1,
                                       .kl_estimator = estimator};
  const double scale = 0.5;
  std::vector<float> d_lp(24), d_ent(24), scratch_lp(24), scratch_ent(24);
  auto loss = [&] {
    return policy_loss({c.logprob, c.old_logprob, c.adv, c.weight, c.entropy, c.ref}, opt, scratch_lp, scratch_ent)
        .loss;
  };
  const auto r = policy_loss({c.logprob, c.old_logprob, c.adv, c.weight, c.entropy, c.ref}, opt, d_lp, d_ent, scale);
  BOOST_TEST(r.clipped == 0.0);
  for (std::size_t i = 0; i < 24; ++i) {
    check_close(d_lp[i], scale * numeric(c.logprob, i, loss, 1e-3f), "d logprob " + std::to_string(i));
    check_close(d_ent[i], scale * numeric(c.entropy, i, loss), "d entropy " + std::to_string(i));
  }
  BOOST_TEST(d_lp[0] == 0.0f);
  BOOST_TEST(d_lp[23] == 0.0f);
  }
}

// The KL estimates at known points: d = logp − ref = 2 gives k1 = 2, k2 = 2, k3 = e^-2 + 1.
BOOST_AUTO_TEST_CASE(kl_estimators_at_a_known_point) {
  const std::vector<float> lp{-1.0f}, ref{-3.0f}, adv{0.0f}, w{1.0f};
  std::vector<float> d(1);
  const std::vector<std::pair<backend::KlEstimator, double>> want = {
      {backend::KlEstimator::k1, 2.0}, {backend::KlEstimator::k2, 2.0}, {backend::KlEstimator::k3, std::exp(-2.0) + 1.0}};
  for (const auto& [k, value] : want) {
    const auto r = policy_loss({lp, lp, adv, w, {}, ref}, {.kl_coef = 1.0, .kl_estimator = k}, d, {});
    BOOST_TEST(r.kl_ref == value, boost::test_tools::tolerance(1e-6));
  }
}

// With a log ratio given per row (GSPO's sequence ratio) the ratio is its exp, whatever the
// row's own logprobs, and the gradient of an unclipped row is −A·ρ (zero where clipped).
BOOST_AUTO_TEST_CASE(a_given_log_ratio_replaces_the_tokens_own) {
  const std::vector<float> lp{-1.0f, -1.0f}, old{-1.0f, -1.0f}, adv{1.0f, 1.0f}, w{0.5f, 0.5f}, lr{0.1f, 0.5f};
  std::vector<float> d(2);
  const auto r = ops().policy_loss(2, {lp.data(), old.data(), adv.data(), w.data(), nullptr, nullptr, lr.data()},
                                   {.clip_low = 0.2, .clip_high = 0.2}, 1.0, d.data(), nullptr);
  BOOST_TEST(d[0] == -0.5 * std::exp(0.1), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(d[1] == 0.0f);  // e^0.5 > 1.2 with A > 0: clipped
  BOOST_TEST(r.ratio_max == std::exp(0.5), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r.clipped == 0.5, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(policy_loss_at_ratio_one_is_minus_mean_advantage_and_grad_is_minus_advantage) {
  const std::vector<float> lp{-1.0f, -2.0f, -0.5f}, adv{1.0f, -2.0f, 0.5f}, w{1 / 3.f, 1 / 3.f, 1 / 3.f};
  std::vector<float> d(3);
  const auto r = policy_loss({lp, lp, adv, w, {}, {}}, {}, d, {});
  BOOST_TEST(r.loss == -(1.0 - 2.0 + 0.5) / 3, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r.approx_kl == 0.0, boost::test_tools::tolerance(1e-12));
  for (int i = 0; i < 3; ++i) BOOST_TEST(d[i] == -adv[i] / 3, boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(policy_loss_clips_only_where_the_surrogate_would_gain) {
  // ratio e^0.5 ≈ 1.65: clipped for A > 0 (no gradient), not for A < 0 (gradient −A·ρ).
  const std::vector<float> lp{-1.0f, -1.0f}, old{-1.5f, -1.5f}, adv{1.0f, -1.0f}, w{0.5f, 0.5f};
  std::vector<float> d(2);
  const auto r = policy_loss({lp, old, adv, w, {}, {}}, {.clip_low = 0.2, .clip_high = 0.2}, d, {});
  BOOST_TEST(d[0] == 0.0f);
  BOOST_TEST(d[1] == 0.5 * std::exp(0.5), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(r.clipped == 0.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r.loss == 0.5 * (-1.2) + 0.5 * std::exp(0.5), boost::test_tools::tolerance(1e-6));
  // ratio e^-0.5: clipped for A < 0 now.
  const std::vector<float> old_high{-0.5f, -0.5f};
  policy_loss({lp, old_high, adv, w, {}, {}}, {.clip_low = 0.2, .clip_high = 0.2}, d, {});
  BOOST_TEST(d[0] == -0.5 * std::exp(-0.5), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(d[1] == 0.0f);
}

BOOST_AUTO_TEST_CASE(k3_kl_to_the_reference_is_zero_at_the_reference_and_positive_elsewhere) {
  const std::vector<float> lp{-1.0f, -1.0f}, ref{-1.0f, -3.0f}, adv{0.0f, 0.0f}, w{0.5f, 0.5f};
  std::vector<float> d(2);
  const auto r = policy_loss({lp, lp, adv, w, {}, ref}, {.kl_coef = 1.0}, d, {});
  const double k3 = std::exp(-2.0) + 2.0 - 1.0;
  BOOST_TEST(r.kl_ref == 0.5 * k3, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(d[0] == 0.0f, boost::test_tools::tolerance(1e-7f));
  BOOST_TEST(d[1] > 0.0f);  // raising logp above ref raises the KL
  std::vector<float> no_ref;
  BOOST_CHECK_THROW(policy_loss({lp, lp, adv, w, {}, no_ref}, {.kl_coef = 1.0}, d, {}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(value_loss_gradient_matches_finite_differences_and_vanishes_when_clipped) {
  Rng rng(5);
  const std::size_t n = 16;
  auto old = normal(rng, n, 1.0);
  auto ret = normal(rng, n, 1.0);
  auto values = old;
  for (auto& v : values) v += static_cast<float>(0.05 * rng.normal());
  std::vector<float> w(n, 1.0f / n), d(n), scratch(n);
  auto loss = [&] { return value_loss({values, old, ret, w}, 0.2, scratch).loss; };
  value_loss({values, old, ret, w}, 0.2, d, 2.0);
  for (std::size_t i = 0; i < n; ++i) check_close(d[i], 2.0 * numeric(values, i, loss, 1e-3f), "d value " + std::to_string(i));

  // V moved past V_old + 0.2 away from R: the clipped term is larger, no gradient.
  const std::vector<float> v1{1.5f}, o1{1.0f}, r1{0.0f}, w1{1.0f};
  std::vector<float> d1(1);
  const auto c = value_loss({v1, o1, r1, w1}, 0.2, d1);
  BOOST_TEST(d1[0] == 1.5f);  // (V − R): the unclipped term 1.5² beats (1.2)²
  BOOST_TEST(c.clipped == 0.0);
  const std::vector<float> r2{3.0f};  // V = 1.5 towards R = 3: clipped V = 1.2 is further, taken, gradient 0
  const auto c2 = value_loss({v1, o1, r2, w1}, 0.2, d1);
  BOOST_TEST(d1[0] == 0.0f);
  BOOST_TEST(c2.clipped == 1.0);
  BOOST_TEST(c2.loss == 0.5 * 1.8 * 1.8, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(pairwise_loss_gradient_matches_finite_differences) {
  Rng rng(9);
  auto chosen = normal(rng, 8, 2.0), rejected = normal(rng, 8, 2.0);
  std::vector<float> dc(8), dr(8), s1(8), s2(8);
  auto loss = [&] { return pairwise_loss(chosen, rejected, s1, s2).loss; };
  const auto r = pairwise_loss(chosen, rejected, dc, dr, 0.25);
  for (std::size_t i = 0; i < 8; ++i) {
    check_close(dc[i], 0.25 * numeric(chosen, i, loss, 1e-3f), "d chosen");
    check_close(dr[i], 0.25 * numeric(rejected, i, loss, 1e-3f), "d rejected");
    BOOST_TEST(dc[i] < 0.0f);  // raising the chosen reward lowers the loss
  }
  // Equal rewards: log 2 per pair, summed.
  const std::vector<float> z(3, 0.5f);
  std::vector<float> a(3), b(3);
  BOOST_TEST(pairwise_loss(z, z, a, b).loss == 3 * std::log(2.0), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(r.correct >= 0.0);
}

BOOST_AUTO_TEST_CASE(nll_loss_sums_the_weighted_nll_and_its_gradient_is_minus_scaled_weight) {
  const std::vector<float> lp{-1.0f, -2.0f, -3.0f, -4.0f}, w{0, 1, 0, 1};  // rows 0 and 2 do not count
  std::vector<float> d(4);
  const double loss = ops().nll_loss(4, lp.data(), w.data(), 0.5, d.data());
  BOOST_TEST(loss == 6.0, boost::test_tools::tolerance(1e-9));  // 2 + 4: a sum; a trainer divides by the units
  const std::vector<float> want{0.0f, -0.5f, 0.0f, -0.5f};
  BOOST_TEST(d == want, boost::test_tools::per_element());
}

// Six pairs of sequences of 3 to 8 rows, the first row of each not counted (a prompt row)
// and one row weighted 0.5: a weighted sum, as length normalisation makes it.
struct DpoData {
  std::vector<std::int64_t> offsets{0};
  std::vector<float> logprob, ref, weight;
};
DpoData dpo_data(Rng& rng) {
  DpoData d;
  for (int s = 0; s < 12; ++s) {
    const std::size_t rows = 3 + rng.below(6);
    for (std::size_t r = 0; r < rows; ++r) d.weight.push_back(r == 0 ? 0.0f : (r == 1 ? 0.5f : 1.0f));
    d.offsets.push_back(std::int64_t(d.weight.size()));
  }
  d.logprob = normal(rng, d.weight.size(), 0.8, -2.0);
  d.ref = normal(rng, d.weight.size(), 0.8, -2.0);
  return d;
}

BOOST_AUTO_TEST_CASE(dpo_loss_gradient_matches_finite_differences) {
  for (const backend::DpoLoss kind : {backend::DpoLoss::sigmoid, backend::DpoLoss::ipo}) {
    Rng rng(11);
    DpoData data = dpo_data(rng);
    const backend::DpoLossOptions opt{.loss = kind, .beta = 0.5};
    const std::size_t n = data.logprob.size();
    std::vector<float> d(n), scratch(n);
    auto loss = [&] { return dpo_loss({data.logprob, data.ref, data.weight, data.offsets}, opt, scratch).loss; };
    const auto r = dpo_loss({data.logprob, data.ref, data.weight, data.offsets}, opt, d, 0.25);
    double largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      check_close(d[i], 0.25 * numeric(data.logprob, i, loss, 1e-3f), kind == backend::DpoLoss::sigmoid ? "sigmoid" : "ipo");
      if (data.weight[i] == 0) BOOST_TEST(d[i] == 0.0f);  // rows that do not count get no gradient
      largest = std::max(largest, double(std::abs(d[i])));
    }
    BOOST_TEST(largest > 1e-3);  // the check means something
    // The sums: 6 pairs, implicit rewards β·(π − π_ref) that add up to the margin.
    BOOST_TEST(r.margin == r.reward_chosen - r.reward_rejected, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(r.correct >= 0.0);
    BOOST_TEST(r.correct <= 6.0);
  }
}

BOOST_AUTO_TEST_CASE(dpo_loss_values_at_known_points) {
  // Policy = reference: z = 0, so DPO gives log 2 a pair, IPO (1/(2β))², no pair counts as right.
  const std::vector<float> lp{-1.0f, -2.0f, -3.0f, -0.5f}, w{1, 1, 1, 1};
  const std::vector<std::int64_t> offsets{0, 2, 4};  // one pair: rows 0-1 chosen, 2-3 rejected
  std::vector<float> d(4);
  const auto sig = dpo_loss({lp, lp, w, offsets}, {.loss = backend::DpoLoss::sigmoid, .beta = 0.1}, d);
  BOOST_TEST(sig.loss == std::log(2.0), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(sig.correct == 0.0);
  BOOST_TEST(d[0] == float(-0.1 * 0.5));  // −β σ(0) on the chosen rows
  BOOST_TEST(d[3] == float(0.1 * 0.5));   // and its negative on the rejected
  BOOST_TEST(sig.logp_chosen == -3.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(sig.logp_rejected == -3.5, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(sig.logp_correct == 1.0);  // −3 > −3.5: the policy alone prefers the chosen one
  const auto ipo = dpo_loss({lp, lp, w, offsets}, {.loss = backend::DpoLoss::ipo, .beta = 0.1}, d);
  BOOST_TEST(ipo.loss == 25.0, boost::test_tools::tolerance(1e-9));  // (0 − 1/0.2)²
  BOOST_TEST(d[0] == -10.0f);                                        // 2(z − 5)
  // The chosen completion 1 nat more likely than under the reference, the rejected 1 less:
  // z = 2, β z = 0.2, loss softplus(−0.2).
  const std::vector<float> ref{-1.5f, -2.5f, -2.5f, 0.0f};
  const auto moved = dpo_loss({lp, ref, w, offsets}, {.loss = backend::DpoLoss::sigmoid, .beta = 0.1}, d);
  BOOST_TEST(moved.margin == 0.2, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(moved.reward_chosen == 0.1, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(moved.reward_rejected == -0.1, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(moved.loss == std::log1p(std::exp(-0.2)), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(moved.correct == 1.0);
  std::vector<float> d2(4);
  BOOST_CHECK_THROW(dpo_loss({lp, ref, w, offsets}, {.loss = backend::DpoLoss::sigmoid, .beta = 0.0}, d2),
                    std::invalid_argument);
}
