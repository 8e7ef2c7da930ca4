#include "rl/gae.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace braid::rl {

void kl_penalised_rewards(std::span<const float> logp_actor, std::span<const float> logp_ref, float reward,
                          double kl_coef, std::span<double> out) {
  const std::size_t n = logp_actor.size();
  if (out.size() != n) throw std::invalid_argument("kl_penalised_rewards: out differs in length from logp_actor");
  const bool with_kl = kl_coef != 0.0;
  if (with_kl && logp_ref.size() != n) {
    throw std::invalid_argument("kl_penalised_rewards: a KL penalty needs reference logprobs for every token");
  }
  for (std::size_t t = 0; t < n; ++t) {
    out[t] = with_kl ? -kl_coef * (double(logp_actor[t]) - double(logp_ref[t])) : 0.0;
  }
  if (n > 0) out[n - 1] += double(reward);
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

PpoAdvantageSummary ppo_advantages(io::SampleBatch& b, const PpoAdvantageOptions& opt) {
  const auto need = [](bool present, const char* name) {
    if (!present) throw std::invalid_argument(fmt::format("PPO advantages need /{}, which the batch lacks", name));
  };
  need(b.logprobs_actor.has_value(), "logprobs/actor");
  need(b.values.has_value(), "values");
  need(b.reward.has_value(), "reward");
  if (opt.kl_coef != 0.0) need(b.logprobs_ref.has_value(), "logprobs/ref");

  b.advantages = std::vector<float>(b.token_count(), 0.0f);
  b.returns = std::vector<float>(b.token_count(), 0.0f);
  PpoAdvantageSummary s;
  double kl_sum = 0, reward_sum = 0, adv_sum = 0, ret_sum = 0;
  std::vector<double> rewards;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::size_t r0 = b.response_begin(i), n = b.response_length(i);
    const auto actor = b.response_of(*b.logprobs_actor, i);
    const auto ref = b.logprobs_ref ? b.response_of(*b.logprobs_ref, i) : std::span<const float>{};
    rewards.assign(n, 0.0);
    kl_penalised_rewards(actor, opt.kl_coef != 0.0 ? ref : std::span<const float>{}, (*b.reward)[i], opt.kl_coef,
                         rewards);
    gae(rewards, b.response_of(*b.values, i), opt.gamma, opt.lambda,
        std::span<float>(*b.advantages).subspan(r0, n), std::span<float>(*b.returns).subspan(r0, n));
    reward_sum += (*b.reward)[i];
    for (std::size_t t = 0; t < n; ++t) {
      if (!ref.empty()) kl_sum += double(actor[t]) - double(ref[t]);
      adv_sum += (*b.advantages)[r0 + t];
      ret_sum += (*b.returns)[r0 + t];
    }
    s.response_tokens += std::int64_t(n);
  }
  if (s.response_tokens > 0) {
    const double n = double(s.response_tokens);
    s.mean_kl = kl_sum / n;
    s.mean_advantage = adv_sum / n;
    s.mean_return = ret_sum / n;
  }
  if (b.size() > 0) s.mean_reward = reward_sum / double(b.size());
  return s;
}

Whitening whiten_advantages(io::SampleBatch& b, double eps) {
  if (!b.advantages) throw std::invalid_argument("whiten_advantages: the batch has no advantages");
  std::vector<float>& a = *b.advantages;
  Whitening w;
  double sum = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) sum += a[t];
    w.tokens += static_cast<std::int64_t>(b.response_length(i));
  }
  if (w.tokens == 0) return w;
  w.mean = sum / static_cast<double>(w.tokens);
  double sq = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) sq += (a[t] - w.mean) * (a[t] - w.mean);
  }
  w.std = std::sqrt(sq / static_cast<double>(w.tokens));
  for (std::size_t i = 0; i < b.size(); ++i) {
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
      a[t] = static_cast<float>((a[t] - w.mean) / (w.std + eps));
    }
  }
  return w;
}

}  // namespace braid::rl
