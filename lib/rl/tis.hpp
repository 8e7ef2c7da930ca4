// Truncated importance sampling (TIS; Yao et al. 2025, "Your efficient RL framework
// secretly brings you off-policy RL training", verl's tis_imp_ratio_cap): the generating
// engine's logprobs μ (what braid-generate recorded, /logprobs/actor) differ from the
// training engine's π_old for the same weights (other kernels, other precision; older
// weights for a deferred sample's tokens). The policy loss takes its ratio against π_old,
// recomputed by the trainer before any update, and weighs each token's policy term by
//
//   w_t = min(exp(log π_old(t) − log μ(t)), cap)        (a constant: no gradient)
//
// Since w_t > 0, w_t · max(−A·ρ, −A·clip(ρ)) = max(−(w_t A)·ρ, −(w_t A)·clip(ρ)): the
// weight is carried by the advantage, and the loss itself is unchanged.
#pragma once

#include "rl/sequence_layout.hpp"

#include <cstdint>
#include <span>

namespace braid::rl {

struct TisSummary {
  double mean_weight = 0;        // over response tokens
  std::int64_t truncated = 0;    // tokens whose weight was capped
  std::int64_t tokens = 0;
  double max_abs_log_ratio = 0;  // largest |log π_old − log μ|
};

// Multiplies each response token's advantage by its weight (prompt positions untouched).
// std::invalid_argument when an array does not fit the layout or cap <= 0.
TisSummary truncated_importance_sampling(const SequenceLayout& layout, std::span<const float> proximal,
                                         std::span<const float> behaviour, double cap, std::span<float> advantages);

}  // namespace braid::rl
