// The whole model's gradient (embedding, every layer, final norm, LM head, value head)
// against finite differences, in double precision, on a tiny config.
#include <boost/test/unit_test.hpp>

#include "tiny_model.hpp"

using namespace braid;
using braid::test::check_gradient;

namespace {

void check_whole_model(bool tied) {
  auto backend = backend::make_cpu_backend(1);
  const auto cfg = test::grad_config(tied);
  model::BasicModel<double> m(cfg, {.lm_head = true, .value_head = true}, *backend);
  m.init_random(7, 0.5);
  test::TinyBatch tb;
  const auto targets = tb.targets();
  const test::LossWeights w(targets.size());
  auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 2, .training = true});
  rl::ChunkedLmHead<double> head(*backend, cfg.vocab_size, cfg.hidden_size, /*chunk_rows*/ 3);

  m.zero_grad();
  m.forward(tb.batch(), acts);
  test::head_loss(m, acts, head, targets, w, true);
  m.backward(acts);
  std::vector<double> grads(m.gradients().begin(), m.gradients().end());

  auto loss = [&] {
    m.forward(tb.batch(), acts);
    return test::head_loss(m, acts, head, targets, w, false);
  };
  const std::size_t first = 0;
  for (auto& t : m.tensors()) {
    const std::size_t off = std::size_t(t.data - m.parameters().data()) - first;
    check_gradient(t.name, t.data, std::size_t(t.numel), grads.data() + off, loss);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_gradients)

BOOST_AUTO_TEST_CASE(untied_with_value_head) { check_whole_model(false); }

BOOST_AUTO_TEST_CASE(tied_embeddings) { check_whole_model(true); }

BOOST_AUTO_TEST_SUITE_END()
