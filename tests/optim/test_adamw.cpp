#define BOOST_TEST_MODULE optim
#include <boost/test/unit_test.hpp>

#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/common/tiny_models.hpp"

#include <cmath>
#include <cstring>
#include <numbers>

using namespace braid;

namespace {

model::ModelConfig tiny() {
  return test::tiny_config({.hidden = 8, .heads = 2, .kv_heads = 1, .intermediate = 16, .vocab = 13, .positions = 16});
}

// One micro-batch's SFT-style gradient: mean NLL of next tokens, scaled by `scale`.
void accumulate(model::Model& m, rl::ChunkedLmHead<float>& head, const std::vector<std::int32_t>& tokens,
                const std::vector<std::int64_t>& offsets, float scale) {
  auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 4, .training = true});
  m.forward({tokens, offsets}, acts);
  const auto t = rl::next_token_targets({tokens, offsets});
  std::vector<float> d(t.size(), 0.0f);
  for (std::size_t i = 0; i < t.size(); ++i) d[i] = t[i] >= 0 ? -scale : 0.0f;
  rl::token_logprobs_backward(m, acts, head, t.data(), d.data(), static_cast<const float*>(nullptr));
  m.backward(acts);
}

}  // namespace

BOOST_AUTO_TEST_CASE(update_matches_the_adamw_formula) {
  auto be = backend::make_cpu_backend(1);
  model::Model m(tiny(), {}, *be);
  m.init_random(1);
  optim::AdamW opt(*be, m.tensors(), {.beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1, .max_grad_norm = 0});
  auto* w = m.find("model.layers.1.mlp.up_proj.weight");
  auto* n = m.find("model.norm.weight");
  std::vector<double> wm(2, 0), wv(2, 0), x{w->data[5], n->data[3]};
  for (int step = 1; step <= 3; ++step) {
    const double g[2] = {0.3 * step - 0.5, -0.2 * step};
    w->grad[5] = float(g[0]);
    n->grad[3] = float(g[1]);
    const double lr = 0.01 * step;
    opt.step(lr, 1.0);
    for (int i = 0; i < 2; ++i) {
      wm[i] = 0.8 * wm[i] + 0.2 * g[i];
      wv[i] = 0.9 * wv[i] + 0.1 * g[i] * g[i];
      const double mh = wm[i] / (1 - std::pow(0.8, step)), vh = wv[i] / (1 - std::pow(0.9, step));
      const double decay = i == 0 ? 0.1 : 0.0;  // norms are not decayed
      x[i] -= lr * (mh / (std::sqrt(vh) + 1e-6) + decay * x[i]);
    }
    BOOST_CHECK_CLOSE(w->data[5], x[0], 1e-3);
    BOOST_CHECK_CLOSE(n->data[3], x[1], 1e-3);
  }
  BOOST_CHECK_EQUAL(opt.steps_taken(), 3);
}

BOOST_AUTO_TEST_CASE(gradient_accumulation_equals_one_big_batch) {
  auto be = backend::make_cpu_backend(1);
  model::Model a(tiny(), {}, *be), b(tiny(), {}, *be);
  a.init_random(2);
  b.init_random(2);
  rl::ChunkedLmHead<float> head(*be, 13, 8, 4);
  const std::vector<std::int32_t> s1{1, 2, 3, 4, 5}, s2{6, 7, 8, 9};
  // a: one batch of both sequences; b: two micro-batches, each its own mean, scaled 1/2.
  const std::vector<std::int32_t> both{1, 2, 3, 4, 5, 6, 7, 8, 9};
  a.zero_grad();
  accumulate(a, head, both, {0, 5, 9}, 1.0f / 7);  // 7 targets
  b.zero_grad();
  accumulate(b, head, s1, {0, 5}, 1.0f / 4 * 8.0f / 7);  // reweighted so the sum is the same mean
  accumulate(b, head, s2, {0, 4}, 1.0f / 3 * 6.0f / 7);
  optim::AdamW oa(*be, a.tensors(), {.weight_decay = 0.01, .max_grad_norm = 0.05});
  optim::AdamW ob(*be, b.tensors(), {.weight_decay = 0.01, .max_grad_norm = 0.05});
  const double na = oa.step(1e-2, 1.0), nb = ob.step(1e-2, 0.5);
  BOOST_CHECK_CLOSE(na, nb, 1e-3);
  BOOST_CHECK_GT(na, 0.05);  // so clipping was active
  const auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) worst = std::max(worst, double(std::abs(pa[i] - pb[i])));
  BOOST_CHECK_LT(worst, 1e-6);
}

BOOST_AUTO_TEST_CASE(clipping_bounds_the_update) {
  auto be = backend::make_cpu_backend(1);
  model::Model m(tiny(), {}, *be);
  optim::AdamW opt(*be, m.tensors(), {.max_grad_norm = 1.0});
  for (float& g : m.gradients()) g = 3.0f;
  const double norm = std::sqrt(opt.grad_sq_norm());
  BOOST_CHECK_CLOSE(norm, 3.0 * std::sqrt(double(m.gradients().size())), 1e-4);
  BOOST_CHECK_CLOSE(opt.step_with_norm(0.0, 1.0, norm), 1.0 / norm, 1e-3);
  BOOST_CHECK_EQUAL(opt.step_with_norm(0.0, 1.0, 0.5), 1.0);
}

BOOST_AUTO_TEST_CASE(lr_schedule_warmup_then_cosine) {
  optim::LrSchedule s{.peak_lr = 1.0, .min_lr = 0.1, .warmup_steps = 4, .total_steps = 14};
  BOOST_CHECK_CLOSE(s.at(0), 0.25, 1e-9);
  BOOST_CHECK_CLOSE(s.at(3), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(s.at(4), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(s.at(9), 0.55, 1e-9);  // halfway down
  BOOST_CHECK_CLOSE(s.at(14), 0.1, 1e-9);
  BOOST_CHECK_CLOSE(s.at(100), 0.1, 1e-9);
  s.kind = optim::LrSchedule::Kind::constant;
  BOOST_CHECK_CLOSE(s.at(9), 1.0, 1e-9);
}

BOOST_AUTO_TEST_CASE(lr_schedule_warmup_then_linear) {
  optim::LrSchedule s{.peak_lr = 2.0, .min_lr = 0.2, .warmup_steps = 2, .total_steps = 11,
                      .kind = optim::LrSchedule::Kind::linear};
  BOOST_CHECK_CLOSE(s.at(0), 1.0, 1e-9);
  BOOST_CHECK_CLOSE(s.at(1), 2.0, 1e-9);
  BOOST_CHECK_CLOSE(s.at(2), 2.0, 1e-9);
  BOOST_CHECK_CLOSE(s.at(5), 2.0 - 1.8 * 3.0 / 9.0, 1e-9);  // a third of the way down
  BOOST_CHECK_CLOSE(s.at(11), 0.2, 1e-9);
  BOOST_CHECK_CLOSE(s.at(50), 0.2, 1e-9);
  // No decay room after warmup: the peak.
  s.total_steps = 2;
  BOOST_CHECK_CLOSE(s.at(7), 2.0, 1e-9);
}

// bf16 storage: the optimizer keeps an f32 master that moves exactly as an f32 model's
// weights do under the same gradients, and the bf16 compute copy is the master rounded.
BOOST_AUTO_TEST_CASE(bf16_model_trains_an_f32_master_and_rounds_it_into_the_compute_copy) {
  auto be = backend::make_cpu_backend(2);
  model::Model half(tiny(), {.dtype = backend::DType::bf16}, *be), full(tiny(), {}, *be);
  half.init_random(9);
  std::vector<float> host;
  for (std::size_t i = 0; i < half.tensors().size(); ++i) {
    host.resize(std::size_t(half.tensors()[i].numel));
    model::read_values(*be, half.tensors()[i], host.data());
    model::write_values(*be, full.tensors()[i], host.data());
  }
  {
    const optim::AdamWConfig cfg{.weight_decay = 0.1, .max_grad_norm = 0.5};
    optim::AdamW oh(*be, half.tensors(), cfg), of(*be, full.tensors(), cfg);
    for (const auto& t : half.tensors()) BOOST_TEST_REQUIRE(t.data != nullptr);   // the master, attached
    for (int step = 1; step <= 5; ++step) {
      for (std::size_t i = 0; i < half.gradients().size(); ++i) {
        const float g = std::sin(float(i * 7 + step * 13)) * 0.3f;
        half.gradients()[i] = g;
        full.gradients()[i] = g;
      }
      BOOST_TEST(oh.step(1e-2, 0.5) == of.step(1e-2, 0.5));
    }
    std::size_t moved = 0;
    for (std::size_t i = 0; i < half.tensors().size(); ++i) {
      const auto& h = half.tensors()[i];
      const auto& f = full.tensors()[i];
      const auto* bits = static_cast<const std::uint16_t*>(h.weights);
      for (std::int64_t j = 0; j < h.numel; ++j) {
        BOOST_TEST_REQUIRE(h.data[j] == f.data[j]);
        BOOST_TEST_REQUIRE(bits[j] == backend::float_to_bf16(h.data[j]));
        moved += h.data[j] != backend::bf16_to_float(bits[j]);
      }
    }
    BOOST_TEST(moved > 0u);   // the master keeps bits the compute copy cannot
  }
  for (const auto& t : half.tensors()) BOOST_TEST(t.data == nullptr);   // detached with the optimizer
}
