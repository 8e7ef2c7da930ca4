#include "rl/gae.hpp"

#include "backend/loss_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace braid::rl {

void kl_penalised_rewards(std::span<const float> logp_actor, std::span<const float> logp_ref, float reward,
                          double kl_coef, backend::KlEstimator estimator, std::span<double> out) {
  const std::size_t n = logp_actor.size();
  if (out.size() != n) throw std::invalid_argument("kl_penalised_rewards: out differs in length from logp_actor");
  const bool with_kl = kl_coef != 0.0;
  if (with_kl && logp_ref.size() != n) {
    throw std::invalid_argument("kl_penalised_rewards: a KL penalty needs reference logprobs for every token");
  }
  for (std::size_t t = 0; t < n; ++t) {
    out[t] = with_kl ? -kl_coef * backend::rows::kl_term(double(logp_actor[t]) - double(logp_ref[t]), estimator).value
                     : 0.0;
  }
  if (n > 0) out[n - 1] += double(reward);
}

double sequence_kl_penalty(std::span<const float> logp_actor, std::span<const float> logp_ref, double kl_coef,
                           backend::KlEstimator estimator) {
  if (kl_coef == 0.0) return 0.0;
  if (logp_ref.size() != logp_actor.size()) {
    throw std::invalid_argument("sequence_kl_penalty: a KL penalty needs reference logprobs for every token");
  }
  double sum = 0;
  for (std::size_t t = 0; t < logp_actor.size(); ++t) {
    sum += backend::rows::kl_term(double(logp_actor[t]) - double(logp_ref[t]), estimator).value;
  }
  return kl_coef * sum;
}

void gae(std::span<const double> rewards, std::span<const float> values, double gamma, double lambda,
         std::span<float> advantages, std::span<float> returns) {
  const std::size_t n = rewards.size();
  if (values.size() != n || advantages.size() != n || returns.size() != n) {
    throw std::invalid_argument("gae: rewards, values, advantages and returns differ in length");
  }
  double next_value = 0.0, next_advantage = 0.0;
  for (std::size_t i = n; i-- > 0;) {
    const double v = values[i];
    const double delta = rewards[i] + gamma * next_value - v;
    const double a = delta + gamma * lambda * next_advantage;
    advantages[i] = float(a);
    returns[i] = float(a + v);
    next_value = v;
    next_advantage = a;
  }
}

PpoAdvantageSummary ppo_advantages(const PpoAdvantageInputs& in, const PpoAdvantageOptions& opt,
                                   std::span<float> advantages, std::span<float> returns) {
  constexpr const char* what = "ppo_advantages";
  const SequenceLayout& l = in.layout;
  l.check(what);
  l.check_per_token(what, "logprobs_actor", in.logprobs_actor.size());
  if (!in.values.empty()) l.check_per_token(what, "values", in.values.size());
  if (opt.kl_coef != 0.0 || !in.logprobs_ref.empty()) l.check_per_token(what, "logprobs_ref", in.logprobs_ref.size());
  if (in.rewards.size() != l.size()) {
    throw std::invalid_argument(
        fmt::format("{}: {} rewards for {} sequences", what, in.rewards.size(), l.size()));
  }
  l.check_per_token(what, "advantages", advantages.size());
  l.check_per_token(what, "returns", returns.size());

  std::fill(advantages.begin(), advantages.end(), 0.0f);
  std::fill(returns.begin(), returns.end(), 0.0f);
  PpoAdvantageSummary s;
  double kl_sum = 0, reward_sum = 0, adv_sum = 0, ret_sum = 0;
  std::vector<double> rewards;
  std::vector<float> zeros;
  for (std::size_t i = 0; i < l.size(); ++i) {
    const std::size_t r0 = l.response_begin(i), n = l.response_length(i);
    const auto actor = in.logprobs_actor.subspan(r0, n);
    const auto ref = in.logprobs_ref.empty() ? std::span<const float>{} : in.logprobs_ref.subspan(r0, n);
    rewards.assign(n, 0.0);
    kl_penalised_rewards(actor, opt.kl_coef != 0.0 ? ref : std::span<const float>{}, in.rewards[i], opt.kl_coef,
                         opt.kl_estimator, rewards);
    zeros.assign(n, 0.0f);
    gae(rewards, in.values.empty() ? std::span<const float>(zeros) : in.values.subspan(r0, n), opt.gamma, opt.lambda,
        advantages.subspan(r0, n), returns.subspan(r0, n));
    reward_sum += in.rewards[i];
    for (std::size_t t = 0; t < n; ++t) {
      if (!ref.empty()) kl_sum += double(actor[t]) - double(ref[t]);
      adv_sum += advantages[r0 + t];
      ret_sum += returns[r0 + t];
    }
    s.response_tokens += std::int64_t(n);
  }
  if (s.response_tokens > 0) {
    const double n = double(s.response_tokens);
    s.mean_kl = kl_sum / n;
    s.mean_advantage = adv_sum / n;
    s.mean_return = ret_sum / n;
  }
  if (l.size() > 0) s.mean_reward = reward_sum / double(l.size());
  return s;
}

Whitening whiten_advantages(backend::Backend& be, const SequenceLayout& layout, std::span<float> a, double eps) {
  layout.check("whiten_advantages");
  layout.check_per_token("whiten_advantages", "advantages", a.size());
  std::vector<std::uint8_t> mask(a.size(), 0);
  for (std::size_t i = 0; i < layout.size(); ++i) {
    for (std::size_t t = layout.response_begin(i); t < layout.end(i); ++t) mask[t] = 1;
  }
  backend::Buffer<float> x(be, a.size());
  backend::Buffer<std::uint8_t> m(be, mask.size());
  be.copy_to_device(x.data(), a.data(), a.size() * sizeof(float));
  be.copy_to_device(m.data(), mask.data(), mask.size());
  const backend::WhiteningStats s = be.ops<float>().whiten(static_cast<std::int64_t>(a.size()), x.data(), m.data(), eps);
  be.copy_to_host(a.data(), x.data(), a.size() * sizeof(float));
  return {.mean = s.mean, .std = s.std, .tokens = s.count};
}

}  // namespace braid::rl
