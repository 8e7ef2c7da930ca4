// Tiny models and batches shared by the model tests, and the scalar loss they check:
//   L = Σ a·logprob(next token) + Σ b·entropy + Σ c·value   (fixed random a, b, c).
#pragma once

#include "grad_check.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/common/tiny_models.hpp"

#include <vector>

namespace braid::test {

// The model of the gradient checks (double precision: every size small).
inline model::ModelConfig grad_config(bool tied = false) {
  return tiny_config({.hidden = 8, .heads = 2, .kv_heads = 1, .intermediate = 12, .vocab = 11, .positions = 16,
                      .tied = tied, .rms_norm_eps = 1e-5, .rope_theta = 100.0});
}

struct TinyBatch {
  std::vector<std::int32_t> tokens{1, 5, 2, 9, 3, 7, 0, 4};
  std::vector<std::int64_t> offsets{0, 5, 8};
  model::Batch batch() const { return {tokens, offsets}; }
  std::vector<std::int32_t> targets() const { return rl::next_token_targets(batch()); }
};

// Weights (a, b, c) of the loss terms, per token.
struct LossWeights {
  std::vector<double> a, b, c;
  explicit LossWeights(std::size_t n) : a(random_values(n, 101)), b(random_values(n, 102)), c(random_values(n, 103)) {}
};

// Runs the last stage's heads on acts: returns L; with grad = true also fills
// acts.output_grad() and the head gradients.
inline double head_loss(model::BasicModel<double>& m, model::BasicActivations<double>& acts,
                        rl::ChunkedLmHead<double>& head, const std::vector<std::int32_t>& targets,
                        const LossWeights& w, bool grad) {
  const std::size_t n = targets.size();
  std::vector<double> lp(n), ent(n), val(n, 0.0);
  rl::token_logprobs(m, acts, head, targets.data(), lp.data(), ent.data());
  const bool has_values = m.find("score.weight") != nullptr;
  if (has_values) m.values(acts, val.data());
  if (grad) {
    rl::token_logprobs_backward(m, acts, head, targets.data(), w.a.data(), w.b.data());
    if (has_values) m.values_backward(acts, w.c.data());
  }
  return dot(w.a, lp) + dot(w.b, ent) + (has_values ? dot(w.c, val) : 0.0);
}

}  // namespace braid::test
