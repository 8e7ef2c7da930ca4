// PPO's per-token rewards and advantages for scored samples (HybridFlow's "compute
// advantage" step; the KL anchor of the systems-for-LLM-RL notes).
//
// For one response of T tokens with sampling-policy logprobs a_t, reference logprobs
// r_t, critic values V_t (the value of the state before token t) and the sequence's
// scalar reward R:
//
//   reward_t = -kl_coef · k(a_t - r_t)  (+ R at t = T-1)   k: the KL estimator, k1 = a_t - r_t
//   δ_t      = reward_t + γ·V_{t+1} - V_t          (V_T = 0: nothing follows the last token)
//   A_t      = δ_t + γλ·A_{t+1}                    (A_T = 0)
//   return_t = A_t + V_t
//
// computed as one backward pass per sequence, in double precision. Without values (no
// critic: V = 0) and λ = 1, A_t is the discounted return-to-go Σ_{s≥t} γ^{s-t} reward_s
// (REINFORCE++, Hu 2025). Batches come as
// spans over the layout of a sample shard (rl/sequence_layout.hpp); lib/score adapts
// its io::SampleBatch to them (score/advantages.hpp).
#pragma once

#include "backend/backend.hpp"
#include "rl/sequence_layout.hpp"

#include <cstdint>
#include <span>

namespace braid::rl {

// Per-token rewards of one response. logp_ref may be empty when kl_coef is 0.
void kl_penalised_rewards(std::span<const float> logp_actor, std::span<const float> logp_ref, float reward,
                          double kl_coef, backend::KlEstimator estimator, std::span<double> out);
// kl_coef · Σ_t k(a_t - r_t) over one response: what a sequence-level reward loses to the
// KL penalty (group estimators with the KL in the reward: R' = R - this).
double sequence_kl_penalty(std::span<const float> logp_actor, std::span<const float> logp_ref, double kl_coef,
                           backend::KlEstimator estimator);

// GAE over one response: advantages and returns (same length as rewards and values).
void gae(std::span<const double> rewards, std::span<const float> values, double gamma, double lambda,
         std::span<float> advantages, std::span<float> returns);

struct PpoAdvantageOptions {
  double kl_coef = 0.05;
  double gamma = 1.0;
  double lambda = 0.95;
  backend::KlEstimator kl_estimator = backend::KlEstimator::k1;
};

// What the pass saw, for logs and stats (means over response tokens / sequences).
struct PpoAdvantageSummary {
  std::int64_t response_tokens = 0;
  double mean_kl = 0;          // mean of a_t - r_t (0 without reference logprobs)
  double mean_reward = 0;      // mean sequence reward R
  double mean_advantage = 0;
  double mean_return = 0;
};

// What PPO's advantages are computed from: per-token arrays (token_count() entries,
// prompt positions unused) and one reward per sequence.
struct PpoAdvantageInputs {
  SequenceLayout layout;
  std::span<const float> logprobs_actor;  // the generating policy's logprobs
  std::span<const float> logprobs_ref;    // the reference model's; may be empty when kl_coef is 0
  std::span<const float> values;          // the critic's values; empty: none (V = 0)
  std::span<const float> rewards;         // per sequence
};

// Fills advantages and returns (token_count() entries each; prompt positions 0).
// std::invalid_argument naming the array whose length does not fit the layout.
PpoAdvantageSummary ppo_advantages(const PpoAdvantageInputs& in, const PpoAdvantageOptions& opt,
                                   std::span<float> advantages, std::span<float> returns);

// Advantage whitening over a training batch (PPO's usual normalisation): every
// response token's advantage becomes (A - mean) / (std + eps), mean and std taken
// over all response tokens of the layout; prompt positions stay as they are. Runs as
// the backend's whiten op on the advantages in be's memory (uploaded and read back).
// Returns the mean and std it removed. std::invalid_argument when advantages is not
// per token.
struct Whitening {
  double mean = 0;
  double std = 0;
  std::int64_t tokens = 0;
};
Whitening whiten_advantages(backend::Backend& be, const SequenceLayout& layout, std::span<float> advantages,
                            double eps = 1e-8);

}  // namespace braid::rl
