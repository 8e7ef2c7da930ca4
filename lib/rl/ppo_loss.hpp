// The PPO / GRPO losses on per-row arrays, with their gradients.
//
// Rows are those of a packed forward: row r produces the token after it. An
// objective (train/objectives.hpp) lays the per-token arrays of a sample batch onto
// rows and gives each row a weight: 0 for rows that do not count (prompt positions,
// the last row of a sequence), 1/N for a token mean over N response tokens, or
// 1/(S·len_s) for GRPO's mean over sequences of per-sequence means. The loss is
// Σ_r weight_r · ℓ_r; the metrics are the same weighted means (divided by Σ weight).
//
// Policy (Schulman et al. 2017; per-token ratio ρ = exp(logp − logp_old)):
//   ℓ = max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high)) − c_H · H + β · k3
//   k3 = exp(ref − logp) − (ref − logp) − 1     (DeepSeekMath's unbiased KL estimator)
// Value (clipped around the values the samples were scored with):
//   ℓ = ½ · max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²)
#pragma once

#include <cstdint>
#include <span>

namespace braid::rl {

struct PolicyLossOptions {
  double clip_low = 0.2;      // ε below 1
  double clip_high = 0.2;     // ε above 1
  double entropy_coef = 0.0;  // c_H: > 0 rewards entropy
  double kl_coef = 0.0;       // β: KL to the reference policy (needs ref_logprob)
};

struct PolicyLossInput {
  std::span<const float> logprob;      // current policy, per row
  std::span<const float> old_logprob;  // the policy that sampled
  std::span<const float> advantages;
  std::span<const float> weight;       // per-row weight of the loss
  std::span<const float> entropy;      // optional (empty): the current policy's entropy
  std::span<const float> ref_logprob;  // optional (empty unless kl_coef > 0)
};

struct PolicyLossResult {
  double loss = 0;           // Σ w·ℓ
  double policy_loss = 0;    // the clipped-surrogate part of it
  double weight = 0;         // Σ w
  // Weighted means (÷ Σ w):
  double clip_fraction = 0;  // rows where the clipped branch was taken (no gradient)
  double approx_kl = 0;      // k3 of old vs current: (ρ − 1) − log ρ
  double entropy = 0;
  double kl_ref = 0;         // k3 of ref vs current
  double ratio_max = 0;      // largest ρ over counted rows
};

// d_logprob[r] = scale · ∂loss/∂logprob_r; d_entropy (may be empty when entropy_coef == 0)
// likewise. std::invalid_argument for spans of different lengths or a missing
// ref_logprob with kl_coef > 0.
PolicyLossResult policy_loss(const PolicyLossInput& in, const PolicyLossOptions& opt, std::span<float> d_logprob,
                             std::span<float> d_entropy, double scale = 1.0);

struct ValueLossInput {
  std::span<const float> values;      // current critic, per row
  std::span<const float> old_values;  // the values the samples were scored with
  std::span<const float> returns;
  std::span<const float> weight;
};

struct ValueLossResult {
  double loss = 0;           // Σ w·ℓ
  double weight = 0;
  double clip_fraction = 0;  // rows where the clipped term was the larger (no gradient)
  double mean_error = 0;     // weighted mean of V − R
};

// clip <= 0: no clipping (½ (V − R)²). d_values[r] = scale · ∂loss/∂values_r.
ValueLossResult value_loss(const ValueLossInput& in, double clip, std::span<float> d_values, double scale = 1.0);

}  // namespace braid::rl
