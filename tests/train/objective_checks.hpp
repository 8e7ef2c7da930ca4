// Checks of an objective on a whole tiny model, shared by the objective and algorithm
// tests: a random batch, the model's own per-token logprobs, and the gradient the
// objective and the model's backward produce against a finite difference of the loss
// along a random direction in parameter space.
#pragma once

#include <boost/test/unit_test.hpp>

#include "core/rng.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "train/objective.hpp"
#include "tests/common/tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace braid::test {

inline model::ModelConfig objective_model() {
  return test::tiny_config();
}

// Sequences of 6 to 13 random tokens with prompts of 2 to 4; sequence i has sample id i.
inline io::SampleBatch random_batch(Rng& rng, std::size_t sequences) {
  io::SampleBatch b;
  for (std::size_t i = 0; i < sequences; ++i) {
    const auto len = 6 + rng.below(8);
    std::vector<std::int32_t> seq(len);
    for (auto& t : seq) t = static_cast<std::int32_t>(rng.below(24));
    b.add(seq, static_cast<std::int32_t>(2 + rng.below(3)), static_cast<std::int64_t>(i));
  }
  return b;
}

inline std::vector<float> per_token(Rng& rng, std::size_t n, double sd, double mean = 0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(mean + sd * rng.normal());
  return v;
}

// Loss of the objective at the model's current weights (gradients discarded).
inline double loss_at(model::Model& m, model::Activations& acts, train::Objective& obj, const io::SampleBatch& mb) {
  m.forward({mb.tokens, mb.offsets}, acts);
  return obj.loss_and_grad(m, acts, mb, 1.0).loss;
}

// g·d from one backward at scale s (divided by s) against (L(θ + h d) − L(θ − h d)) / 2h,
// within 3% (the two agree within 0.5% where no token sits on a clip boundary).
inline void check_directional_derivative(model::Model& m, train::Objective& obj, const io::SampleBatch& mb,
                                         std::uint64_t seed) {
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  const double scale = 0.5;
  m.zero_grad();
  m.forward({mb.tokens, mb.offsets}, acts);
  obj.loss_and_grad(m, acts, mb, scale);
  m.backward(acts);

  Rng rng(seed);
  auto params = m.parameters();
  auto grads = m.gradients();
  std::vector<float> base(params.begin(), params.end()), dir(params.size());
  double analytic = 0;
  for (std::size_t i = 0; i < dir.size(); ++i) {
    dir[i] = static_cast<float>(rng.normal());
    analytic += double(grads[i]) * dir[i] / scale;
  }
  // Small: along a random direction of this size the logprobs move fast, and a step of
  // 1e-3 already carries some tokens' ratios across a clip boundary.
  const double h = 3e-4;
  auto shifted = [&](double t) {
    for (std::size_t i = 0; i < dir.size(); ++i) params[i] = static_cast<float>(base[i] + t * dir[i]);
    return loss_at(m, acts, obj, mb);
  };
  const double numeric = (shifted(h) - shifted(-h)) / (2 * h);
  std::copy(base.begin(), base.end(), params.begin());
  BOOST_TEST_MESSAGE("directional derivative: analytic " << analytic << ", numeric " << numeric);
  BOOST_TEST(std::abs(analytic) > 1e-3);  // the check means something
  BOOST_TEST(std::abs(analytic - numeric) <= 0.03 * std::abs(numeric) + 1e-4,
             "analytic " << analytic << " vs numeric " << numeric);
}

// Current per-token logprobs of mb (entry t from row t − 1), for old logprobs near them.
inline std::vector<float> current_logprobs(model::Model& m, const io::SampleBatch& mb) {
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16});
  m.forward({mb.tokens, mb.offsets}, acts);
  rl::ChunkedLmHead<float> head(m.backend(), m.config().vocab_size, m.config().hidden_size, 16);
  const auto targets = rl::next_token_targets({mb.tokens, mb.offsets});
  std::vector<float> rows(mb.token_count()), out(mb.token_count(), 0.0f);
  rl::token_logprobs<float>(m, acts, head, targets.data(), rows.data(), nullptr);
  for (std::size_t i = 0; i < mb.size(); ++i)
    for (std::size_t t = mb.begin(i) + 1; t < mb.end(i); ++t) out[t] = rows[t - 1];
  return out;
}

}  // namespace braid::test
