// PPO's per-token rewards and advantages for scored samples (HybridFlow's "compute
// advantage" step; the KL anchor of the systems-for-LLM-RL notes).
//
// For one response of T tokens with sampling-policy logprobs a_t, reference logprobs
// r_t, critic values V_t (the value of the state before token t) and the sequence's
// scalar reward R:
//
//   reward_t = -kl_coef · (a_t - r_t)  (+ R at t = T-1)
//   δ_t      = reward_t + γ·V_{t+1} - V_t          (V_T = 0: nothing follows the last token)
//   A_t      = δ_t + γλ·A_{t+1}                    (A_T = 0)
//   return_t = A_t + V_t
//
// computed as one backward pass per sequence, in double precision.
#pragma once

#include "io/sample_batch.hpp"

#include <span>

namespace braid::rl {

// Per-token rewards of one response. logp_ref may be empty when kl_coef is 0.
void kl_penalised_rewards(std::span<const float> logp_actor, std::span<const float> logp_ref, float reward,
                          double kl_coef, std::span<double> out);

// GAE over one response: advantages and returns (same length as rewards and values).
void gae(std::span<const double> rewards, std::span<const float> values, double gamma, double lambda,
         std::span<float> advantages, std::span<float> returns);

struct PpoAdvantageOptions {
  double kl_coef = 0.05;
  double gamma = 1.0;
  double lambda = 0.95;
};

// What the pass saw, for logs and stats (means over response tokens / sequences).
struct PpoAdvantageSummary {
  std::int64_t response_tokens = 0;
  double mean_kl = 0;          // mean of a_t - r_t (0 without reference logprobs)
  double mean_reward = 0;      // mean sequence reward R
  double mean_advantage = 0;
  double mean_return = 0;
};

// Fills b.advantages and b.returns (prompt positions 0) from b.logprobs_actor,
// b.logprobs_ref (needed when kl_coef != 0), b.values and b.reward.
// std::invalid_argument naming the missing array.
PpoAdvantageSummary ppo_advantages(io::SampleBatch& b, const PpoAdvantageOptions& opt);

// Advantage whitening over a training batch (PPO's usual normalisation): every
// response token's advantage becomes (A - mean) / (std + eps), mean and std taken
// over all response tokens of b; prompt positions stay as they are. Returns the
// mean and std it removed. std::invalid_argument without b.advantages.
struct Whitening {
  double mean = 0;
  double std = 0;
  std::int64_t tokens = 0;
};
Whitening whiten_advantages(io::SampleBatch& b, double eps = 1e-8);

}  // namespace braid::rl
