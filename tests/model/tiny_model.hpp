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

// One whole pass of a value model over two sequences of `tokens` tokens (the first `split`
// long): forward, each token's logprob and value, then the backward of the loss
// Σ -logprob/tokens + entropy_grad·Σ entropy + value_grad·Σ value (entropy_grad 0: no
// entropy computed; the value gradient -1/tokens when value_grad is 0), the LM head in
// chunks of `head_chunk` rows.
struct WholePass {
  std::vector<float> output, logprob, values, grads;
};

inline WholePass whole_pass(model::Model& m, int tokens, int split, int head_chunk, float entropy_grad = 0,
                            float value_grad = 0) {
  const auto& c = m.config();
  const auto n = static_cast<std::size_t>(tokens);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < tokens; ++i) ids.push_back((i * 37 + 11) % c.vocab_size);
  const std::vector<std::int64_t> offsets{0, split, tokens};
  const model::Batch batch{ids, offsets};
  auto acts = m.make_activations({.max_tokens = tokens, .max_sequences = 2, .training = true});
  m.zero_grad();
  m.forward(batch, acts);
  WholePass p;
  p.output.assign(acts.output(), acts.output() + n * static_cast<std::size_t>(c.hidden_size));
  const auto targets = rl::next_token_targets(batch);
  rl::ChunkedLmHead<float> head(m.backend(), c.vocab_size, c.hidden_size, head_chunk);
  p.logprob.resize(n);
  p.values.resize(n);
  std::vector<float> ent(n), d(n, -1.0f / static_cast<float>(tokens)), dh(n, entropy_grad),
      dv(n, value_grad == 0 ? -1.0f / static_cast<float>(tokens) : value_grad);
  float* entropy = entropy_grad == 0 ? nullptr : ent.data();
  rl::token_logprobs(m, acts, head, targets.data(), p.logprob.data(), entropy);
  m.values(acts, p.values.data());
  rl::token_logprobs_backward(m, acts, head, targets.data(), d.data(), entropy_grad == 0 ? nullptr : dh.data());
  m.values_backward(acts, dv.data());
  m.backward(acts);
  p.grads.assign(m.gradients().begin(), m.gradients().end());
  return p;
}

}  // namespace braid::test
