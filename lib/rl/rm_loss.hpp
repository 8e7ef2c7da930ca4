// The reward model's pairwise loss (Bradley–Terry, as in InstructGPT):
//   loss = mean over pairs of −log σ(r_chosen − r_rejected) = softplus(r_rejected − r_chosen)
// where r is the model's scalar at the last token of each completion.
#pragma once

#include <span>

namespace braid::rl {

struct PairwiseLossResult {
  double loss = 0;       // mean over pairs
  double accuracy = 0;   // fraction of pairs with r_chosen > r_rejected
  double margin = 0;     // mean r_chosen − r_rejected
};

// d_chosen[i], d_rejected[i] = scale · ∂loss/∂r. std::invalid_argument for spans of
// different lengths; an empty input gives zeros.
PairwiseLossResult pairwise_loss(std::span<const float> chosen, std::span<const float> rejected,
                                 std::span<float> d_chosen, std::span<float> d_rejected, double scale = 1.0);

}  // namespace braid::rl
