// Supervised fine-tuning loss: the mean negative log-likelihood of the target tokens.
#pragma once

#include <cstdint>
#include <span>

namespace braid::rl {

// loss = -Σ w_i · logprob_i / Σ w_i over rows with targets[i] >= 0 and (if given)
// loss_mask[i] != 0; d_logprob (same length) receives ∂loss/∂logprob_i · scale.
// Returns the loss (0 when no row counts).
double sft_loss(std::span<const float> logprob, std::span<const std::int32_t> targets,
                std::span<const std::uint8_t> loss_mask, std::span<float> d_logprob,
                double scale = 1.0);

}  // namespace braid::rl
