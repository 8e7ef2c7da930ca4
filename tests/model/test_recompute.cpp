// Activation recomputation (ActivationOptions::recompute) changes no result: the output and
// every gradient are the same bits whether backward finds a layer's activations kept or
// recomputes them, for every family's pieces (biases, q/k norms, Gemma's norms), on a whole
// model and on a later pipeline stage (its input gradient too), with LoRA adapters too.
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "family_configs.hpp"
#include "grad_check.hpp"
#include "model/model.hpp"

#include <cstring>
#include <vector>

using namespace braid;

namespace {

struct Result {
  std::vector<float> output, grads, input_grad;
};

// Two training steps' worth of forward and backward (the second over other lengths, so that a
// stale slot would show) with a fixed output gradient; the second's output and the sum of
// both gradients.
Result run(const model::ModelConfig& c, model::LayerRange layers, int recompute, const model::LoraOptions& lora) {
  auto be = backend::make_cpu_backend(2);
  model::Model m(c, {.layers = layers, .lora = lora}, *be);
  m.init_random(11, 0.3);
  m.init_adapters(12, 0.3);
  auto acts = m.make_activations({.max_tokens = 12, .max_sequences = 3, .training = true, .recompute = recompute});
  const std::vector<std::int32_t> tokens{1, 5, 2, 9, 3, 7, 0, 4, 8, 6, 2, 1};
  const std::vector<std::vector<std::int64_t>> offsets{{0, 5, 12}, {0, 3, 7, 10}};
  Result r;
  m.zero_grad();
  for (const auto& off : offsets) {
    const std::int64_t n = off.back(), D = c.hidden_size;
    if (!m.is_first_stage()) {
      const auto in = test::random_values(std::size_t(n * D), 5);
      for (std::int64_t i = 0; i < n * D; ++i) acts.input()[i] = float(in[std::size_t(i)]);
    }
    m.forward({std::span(tokens).first(std::size_t(n)), off}, acts);
    const auto dy = test::random_values(std::size_t(n * D), 6);
    for (std::int64_t i = 0; i < n * D; ++i) acts.output_grad()[i] = float(dy[std::size_t(i)]);
    m.backward(acts);
    r.output.assign(acts.output(), acts.output() + n * D);
    if (!m.is_first_stage()) r.input_grad.assign(acts.input_grad(), acts.input_grad() + n * D);
  }
  if (lora.enabled()) {   // the base's gradients are not computed under LoRA
    for (const auto& t : m.adapters()) r.grads.insert(r.grads.end(), t.grad, t.grad + t.numel);
  } else {
    r.grads.assign(m.gradients().begin(), m.gradients().end());
  }
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recompute)

BOOST_AUTO_TEST_CASE(recomputed_layers_give_the_same_bits) {
  for (const auto& f : test::family_configs()) {
    const model::ModelConfig c = f.parsed();
    for (const auto& [layers, lora] :
         {std::pair{model::LayerRange{0, -1}, model::LoraOptions{}}, std::pair{model::LayerRange{1, 3}, model::LoraOptions{}},
          std::pair{model::LayerRange{0, -1}, model::LoraOptions{.rank = 2}}}) {
      const Result kept = run(c, layers, 0, lora);
      for (const int k : {1, 2, 3}) {
        BOOST_TEST_CONTEXT(f.name << ", layers from " << layers.begin << ", LoRA rank " << lora.rank << ", recompute " << k) {
          const Result again = run(c, layers, k, lora);
          BOOST_TEST(same_bits(kept.output, again.output));
          BOOST_TEST(same_bits(kept.grads, again.grads));
          BOOST_TEST(same_bits(kept.input_grad, again.input_grad));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(which_layers_are_recomputed) {
  BOOST_TEST(!model::recomputed_layer(0, 0));
  BOOST_TEST(model::recomputed_layer(3, 1));
  BOOST_TEST(model::recomputed_layer(4, 2));
  BOOST_TEST(!model::recomputed_layer(5, 2));
  auto be = backend::make_cpu_backend(1);
  model::Model m(test::family_configs().front().parsed(), {}, *be);
  BOOST_CHECK_THROW(m.make_activations({.max_tokens = 4, .training = true, .recompute = -1}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
