// LoRA adapters (model/lora.hpp): their gradients against finite differences and against the
// direct computation from the merged weight's gradient (dA = s·Bᵀ·G, dB = s·G·Aᵀ), in double
// precision on every family's pieces; merged and unmerged models giving the same logits and
// greedy tokens; adapters off giving the base model; the options refused when unusable.
#include <boost/test/unit_test.hpp>

#include "backend/dropout_draw.hpp"
#include "family_configs.hpp"
#include "tiny_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace braid;
using braid::test::check_gradient;

namespace {

model::LoraOptions lora(std::vector<std::string> targets = {}, bool rslora = false, bool value_head = false) {
  return {.rank = 2, .alpha = 3, .rslora = rslora, .targets = std::move(targets), .value_head = value_head};
}

template <typename T>
std::vector<T> host_of(backend::Backend& be, const model::Tensor<T>& t) {
  std::vector<T> v(std::size_t(t.numel));
  model::read_values(be, t, v.data());
  return v;
}

struct Case {
  std::string name;
  model::ModelConfig config;
  model::LoraOptions lora;
};

std::vector<Case> cases() {
  std::vector<Case> out{{"tiny, every module", test::grad_config(), lora()},
                        {"tiny, tied, q and v, rsLoRA", test::grad_config(true), lora({"q_proj", "v_proj"}, true)},
                        {"tiny, o, gate, down", test::grad_config(), lora({"o_proj", "gate_proj", "down_proj"})},
                        {"tiny, k and up, the value head trained", test::grad_config(), lora({"k_proj", "up_proj"}, false, true)}};
  for (const auto& f : test::family_configs({.hidden = 8, .heads = 2, .kv_heads = 1, .head_dim = 4, .inter = 6,
                                             .vocab = 11, .layers = 2, .max_positions = 16}))
    out.push_back({f.name, f.parsed(), lora()});
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lora_adapters)

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_and_the_direct_computation) {
  for (const Case& k : cases()) {
    BOOST_TEST_CONTEXT(k.name) {
      auto be = backend::make_cpu_backend(1);
      model::BasicModel<double> m(
          k.config, {.lm_head = true, .value_head = true, .value_bias = k.lora.value_head, .lora = k.lora}, *be);
      m.init_random(7, 0.5);
      m.init_adapters(3, 0.4);
      test::TinyBatch tb;
      const auto targets = tb.targets();
      const test::LossWeights w(targets.size());
      auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 2, .training = true});
      rl::ChunkedLmHead<double> head(*be, k.config.vocab_size, k.config.hidden_size, 3);
      m.zero_grad();
      m.forward(tb.batch(), acts);
      const double adapted_loss = test::head_loss(m, acts, head, targets, w, true);
      m.backward(acts);
      auto loss = [&] {
        m.forward(tb.batch(), acts);
        return test::head_loss(m, acts, head, targets, w, false);
      };
      BOOST_TEST(!m.adapters().empty());
      for (auto& t : m.adapters()) {
        const std::vector<double> g(t.grad, t.grad + t.numel);
        check_gradient(t.name, t.data, std::size_t(t.numel), g.data(), loss);
      }

      // The same model with the adapters merged into its weights, trained in full: its
      // weight's gradient G gives the adapters' as dA = s·Bᵀ·G, dB = s·G·Aᵀ.
      model::BasicModel<double> full(k.config, {.lm_head = true, .value_head = true, .value_bias = k.lora.value_head},
                                     *be);
      m.merge_adapters();
      BOOST_TEST(!m.adapters_enabled());
      for (auto& t : full.tensors()) model::write_values(*be, t, host_of(*be, *m.find(t.name)).data());
      auto full_acts = full.make_activations({.max_tokens = 8, .max_sequences = 2, .training = true});
      full.zero_grad();
      full.forward(tb.batch(), full_acts);
      const double merged_loss = test::head_loss(full, full_acts, head, targets, w, true);
      full.backward(full_acts);
      BOOST_TEST(std::abs(merged_loss - adapted_loss) <= 1e-12 * std::max(1.0, std::abs(adapted_loss)));
      const double s = k.lora.scaling();
      // The value head's trained copy: the merged model's head gradient itself.
      for (const auto& t : m.adapters()) {
        if (t.layer >= 0) continue;
        const auto* G = full.find(t.name)->grad;
        double worst = 0;
        for (std::int64_t j = 0; j < t.numel; ++j) worst = std::max(worst, std::abs(G[j] - t.grad[j]));
        BOOST_TEST(worst <= 1e-10, t.name << ": largest difference from the merged model's gradient " << worst);
      }
      BOOST_TEST((m.adapters().back().layer < 0) == k.lora.value_head);
      for (std::size_t i = 0; i + 1 < m.adapters().size() && m.adapters()[i].layer >= 0; i += 2) {
        const auto& ta = m.adapters()[i];
        const auto& tb2 = m.adapters()[i + 1];
        const std::string base = ta.name.substr(0, ta.name.size() - std::string("lora_A.weight").size()) + "weight";
        const auto* G = full.find(base)->grad;
        const std::int64_t r = ta.shape[0], in = ta.shape[1], out = tb2.shape[0];
        double worst = 0;
        for (std::int64_t a = 0; a < r; ++a)
          for (std::int64_t j = 0; j < in; ++j) {
            double d = 0;
            for (std::int64_t o = 0; o < out; ++o) d += tb2.data[o * r + a] * G[o * in + j];
            worst = std::max(worst, std::abs(s * d - ta.grad[a * in + j]));
          }
        for (std::int64_t o = 0; o < out; ++o)
          for (std::int64_t a = 0; a < r; ++a) {
            double d = 0;
            for (std::int64_t j = 0; j < in; ++j) d += G[o * in + j] * ta.data[a * in + j];
            worst = std::max(worst, std::abs(s * d - tb2.grad[o * r + a]));
          }
        BOOST_TEST(worst <= 1e-10, base << ": largest difference from s·Bᵀ·G and s·G·Aᵀ " << worst);
      }
    }
  }
}

// Generation with the adapters applied and with them merged into the weights: the logits of a
// prompt and of each greedy step within float rounding, the same greedy tokens.
BOOST_AUTO_TEST_CASE(merged_and_unmerged_generate_the_same_tokens) {
  for (const Case& k : cases()) {
    BOOST_TEST_CONTEXT(k.name) {
      auto be = backend::make_cpu_backend(1);
      model::Model m(k.config, {.value_head = k.lora.value_head, .lora = k.lora}, *be);
      m.init_random(5, 0.3);
      m.init_adapters(6, 0.3);
      auto greedy = [&](std::vector<float>& logits_out) {
        auto cache = m.make_kv_cache(1, 16);
        auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 1});
        std::vector<std::int32_t> seq{1, 5, 2};
        m.forward_cached(seq, std::vector<model::Segment>{{0, 3}}, cache, acts);
        logits_out.clear();
        for (int step = 0; step < 8; ++step) {
          const float* lg = acts.logits();
          logits_out.insert(logits_out.end(), lg, lg + k.config.vocab_size);
          const auto next = std::int32_t(std::max_element(lg, lg + k.config.vocab_size) - lg);
          seq.push_back(next);
          m.forward_cached(std::vector<std::int32_t>{next}, std::vector<model::Segment>{{0, 1}}, cache, acts);
        }
        return seq;
      };
      std::vector<float> unmerged_logits, merged_logits, base_logits;
      m.set_adapters_enabled(false);
      greedy(base_logits);
      m.set_adapters_enabled(true);
      const auto unmerged = greedy(unmerged_logits);
      m.merge_adapters();
      const auto merged = greedy(merged_logits);
      BOOST_TEST(unmerged == merged, boost::test_tools::per_element());
      float worst = 0, moved = 0;
      for (std::size_t i = 0; i < merged_logits.size(); ++i) {
        worst = std::max(worst, std::abs(merged_logits[i] - unmerged_logits[i]));
        moved = std::max(moved, std::abs(base_logits[i] - unmerged_logits[i]));
      }
      BOOST_TEST(worst <= 1e-5f);
      BOOST_TEST(moved > 1e-3f, "the adapters change the model");
    }
  }
}

// Adapters off is the base model to the bit: a LoRA run's reference needs no second copy.
BOOST_AUTO_TEST_CASE(adapters_off_is_the_base_model) {
  auto be = backend::make_cpu_backend(1);
  const auto cfg = test::grad_config();
  model::Model base(cfg, {}, *be), adapted(cfg, {.lora = lora()}, *be);
  base.init_random(9);
  adapted.init_random(9);
  adapted.init_adapters(1, 0.5);
  adapted.set_adapters_enabled(false);
  test::TinyBatch tb;
  auto a1 = base.make_activations({.max_tokens = 8, .max_sequences = 2});
  auto a2 = adapted.make_activations({.max_tokens = 8, .max_sequences = 2});
  base.forward(tb.batch(), a1);
  adapted.forward(tb.batch(), a2);
  BOOST_TEST(std::memcmp(a1.output(), a2.output(), 8 * std::size_t(cfg.hidden_size) * sizeof(float)) == 0);
  // Fresh adapters (B = 0) start as the base too.
  adapted.set_adapters_enabled(true);
  adapted.init_adapters(2);
  adapted.forward(tb.batch(), a2);
  BOOST_TEST(std::memcmp(a1.output(), a2.output(), 8 * std::size_t(cfg.hidden_size) * sizeof(float)) == 0);
}

// The value head trained beside the adapters (PEFT's modules_to_save): a copy of the base's
// head, read while the adapters are on (the base's while off), the only head the backward
// trains, and merged into the base's.
BOOST_AUTO_TEST_CASE(the_value_head_is_a_trained_copy) {
  auto be = backend::make_cpu_backend(1);
  const auto cfg = test::grad_config();
  model::Model m(cfg, {.lm_head = false, .value_head = true, .value_bias = true, .lora = lora({"q_proj"}, false, true)},
                 *be);
  m.init_random(4);
  m.init_adapters(5);
  BOOST_REQUIRE(m.adapters().size() == 2 * std::size_t(cfg.num_hidden_layers) + 2);
  auto& copy = m.adapters()[m.adapters().size() - 2];
  auto& bias = m.adapters().back();
  BOOST_TEST(copy.name == "score.weight");
  BOOST_TEST(bias.name == "score.bias");
  BOOST_TEST(host_of(*be, copy) == host_of(*be, *m.find("score.weight")), boost::test_tools::per_element());
  test::TinyBatch tb;
  auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 2, .training = true});
  auto values = [&] {
    std::vector<float> v(8);
    m.forward(tb.batch(), acts);
    m.values(acts, v.data());
    return v;
  };
  const std::vector<float> base = values();
  std::vector<float> w = host_of(*be, copy);
  for (float& x : w) x = -2 * x;
  model::write_values(*be, copy, w.data());
  const float b = 0.25f;
  model::write_values(*be, bias, &b);
  const std::vector<float> trained = values();
  BOOST_TEST(trained != base);
  m.set_adapters_enabled(false);
  BOOST_TEST(values() == base, boost::test_tools::per_element());
  m.set_adapters_enabled(true);
  // The backward trains the copy (the base's head gets no gradient of its own to read).
  m.zero_grad();
  const std::vector<float> d(8, 1.f);
  values();
  m.values_backward(acts, d.data());
  BOOST_TEST(host_of(*be, bias).size() == 1u);
  float grad_b = 0;
  be->copy_to_host(&grad_b, bias.grad, sizeof(float));
  BOOST_TEST(grad_b == 8.f);
  m.merge_adapters();
  BOOST_TEST(host_of(*be, *m.find("score.weight")) == w, boost::test_tools::per_element());
  const std::vector<float> merged = values();
  for (std::size_t i = 0; i < merged.size(); ++i) BOOST_TEST(merged[i] == trained[i], boost::test_tools::tolerance(1e-5f));
  // A value head to train on a model without one is refused.
  BOOST_CHECK_THROW(model::Model(cfg, {.lora = lora({}, false, true)}, *be), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(options_are_checked) {
  BOOST_TEST(lora().scaling() == 1.5);
  BOOST_TEST(lora({}, true).scaling() == 3 / std::sqrt(2.0));
  BOOST_TEST(model::parse_lora_targets("q, v_proj,down") ==
                 (std::vector<std::string>{"q_proj", "v_proj", "down_proj"}),
             boost::test_tools::per_element());
  BOOST_TEST(model::parse_lora_targets("all") == model::lora_modules(), boost::test_tools::per_element());
  BOOST_TEST(model::parse_lora_targets("") == model::lora_modules(), boost::test_tools::per_element());
  BOOST_CHECK_THROW(model::parse_lora_targets("q,lm_head"), std::invalid_argument);
  auto be = backend::make_cpu_backend(1);
  const auto cfg = test::grad_config();
  for (const model::LoraOptions& bad : {model::LoraOptions{.rank = -1}, model::LoraOptions{.rank = 2, .alpha = 0},
                                        model::LoraOptions{.rank = 2, .dropout = 1.0},
                                        model::LoraOptions{.rank = 2, .dropout = -0.1},
                                        model::LoraOptions{.rank = 2, .targets = {"lm_head"}}}) {
    BOOST_CHECK_THROW(model::Model(cfg, {.lora = bad}, *be), std::invalid_argument);
  }
}

namespace {

// One forward and backward of sequences [first, last) of the tiny batch with dropout keys
// `keys` (one per sequence) under draw seed `seed` (no draw when keys is empty), the loss
// weights of those tokens: the loss; the gradients accumulate.
double masked_pass(model::BasicModel<double>& m, rl::ChunkedLmHead<double>& head, std::size_t first, std::size_t last,
                   const std::vector<std::uint64_t>& keys, std::uint64_t seed, bool backward, int recompute = 0) {
  const test::TinyBatch tb;
  const auto b = std::size_t(tb.offsets[first]), e = std::size_t(tb.offsets[last]);
  const std::vector<std::int32_t> tokens(tb.tokens.begin() + std::ptrdiff_t(b), tb.tokens.begin() + std::ptrdiff_t(e));
  std::vector<std::int64_t> offsets;
  for (std::size_t s = first; s <= last; ++s) offsets.push_back(tb.offsets[s] - std::int64_t(b));
  const test::LossWeights all(tb.tokens.size());
  test::LossWeights w(e - b);
  w.a.assign(all.a.begin() + std::ptrdiff_t(b), all.a.begin() + std::ptrdiff_t(e));
  w.b.assign(all.b.begin() + std::ptrdiff_t(b), all.b.begin() + std::ptrdiff_t(e));
  w.c.assign(all.c.begin() + std::ptrdiff_t(b), all.c.begin() + std::ptrdiff_t(e));
  const model::DropoutDraw draw{.sequence_keys = keys, .seed = seed};
  const model::Batch batch{tokens, offsets, keys.empty() ? nullptr : &draw};
  auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 2, .training = true, .recompute = recompute});
  m.forward(batch, acts);
  const double loss = test::head_loss(m, acts, head, rl::next_token_targets(batch), w, backward);
  if (backward) m.backward(acts);
  return loss;
}

std::vector<double> adapter_grads(model::BasicModel<double>& m) {
  std::vector<double> g;
  for (const auto& t : m.adapters()) g.insert(g.end(), t.grad, t.grad + t.numel);
  return g;
}

}  // namespace

// LoRA dropout (PEFT's lora_dropout: an adapter's input is x·mask/(1 − p) in a training
// forward). p = 0 is the model without dropout to the bit, draw or none, and so is any p
// without a draw (scoring, evaluation, generation); with p = 0.3 the adapters' gradients equal
// finite differences of the same masked loss (the same draw), recomputing every layer changes
// no bit, the batch cut into two micro-batches gives the same loss and gradients to rounding
// (the mask keyed by sequence and position, not by where a row sits), another seed draws
// another mask, and the mask keeps 1 − p of the elements.
BOOST_AUTO_TEST_CASE(dropout_masks_the_adapters_input_by_the_draw) {
  auto be = backend::make_cpu_backend(1);
  const auto cfg = test::grad_config();
  auto make = [&](double p) {
    model::LoraOptions lo = lora({}, false, true);
    lo.dropout = p;
    auto m = std::make_unique<model::BasicModel<double>>(
        cfg, model::ModelOptions{.lm_head = true, .value_head = true, .value_bias = true, .lora = lo}, *be);
    m->init_random(7, 0.5);
    m->init_adapters(3, 0.4);
    return m;
  };
  auto plain = make(0), dropped = make(0.3);
  rl::ChunkedLmHead<double> head(*be, cfg.vocab_size, cfg.hidden_size, 3);
  const std::vector<std::uint64_t> keys{11, 22};

  plain->zero_grad();
  const double base = masked_pass(*plain, head, 0, 2, {}, 0, true);
  const std::vector<double> base_grads = adapter_grads(*plain);
  plain->zero_grad();
  BOOST_TEST(masked_pass(*plain, head, 0, 2, keys, 5, true) == base);
  BOOST_TEST(adapter_grads(*plain) == base_grads, boost::test_tools::per_element());
  BOOST_TEST(masked_pass(*dropped, head, 0, 2, {}, 0, false) == base);

  dropped->zero_grad();
  const double loss = masked_pass(*dropped, head, 0, 2, keys, 5, true);
  const std::vector<double> grads = adapter_grads(*dropped);
  BOOST_TEST(std::abs(loss - base) > 1e-6, "the mask changes the loss");
  BOOST_TEST(std::abs(masked_pass(*dropped, head, 0, 2, keys, 6, false) - loss) > 1e-6, "another seed, another mask");
  for (auto& t : dropped->adapters()) {
    const std::vector<double> g(t.grad, t.grad + t.numel);
    check_gradient(t.name, t.data, std::size_t(t.numel), g.data(),
                   [&] { return masked_pass(*dropped, head, 0, 2, keys, 5, false); });
  }
  dropped->zero_grad();
  BOOST_TEST(masked_pass(*dropped, head, 0, 2, keys, 5, true, /*recompute*/ 1) == loss);
  BOOST_TEST(adapter_grads(*dropped) == grads, boost::test_tools::per_element());
  // Two micro-batches: each sequence with its own key, the losses and gradients summed.
  dropped->zero_grad();
  const double split = masked_pass(*dropped, head, 0, 1, {keys[0]}, 5, true) +
                       masked_pass(*dropped, head, 1, 2, {keys[1]}, 5, true);
  BOOST_TEST(split == loss, boost::test_tools::tolerance(1e-12));
  const std::vector<double> split_grads = adapter_grads(*dropped);
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    worst = std::max(worst, std::abs(split_grads[i] - grads[i]));
    largest = std::max(largest, std::abs(grads[i]));
  }
  BOOST_TEST(worst <= 1e-12 * largest);

  // The draw keeps 1 − p of the elements (100 000 of them: 3.5 standard deviations is 0.005).
  const std::int64_t rows = 1000, cols = 100;
  std::vector<std::uint64_t> row_keys(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < row_keys.size(); ++r) row_keys[r] = backend::dropout_row_key(42, std::int64_t(r));
  std::vector<double> ones(std::size_t(rows * cols), 1.0), out(ones.size());
  be->ops<double>().dropout(rows, cols, ones.data(), row_keys.data(), 0, 9, 0.3, out.data());
  double kept = 0;
  for (double x : out) {
    BOOST_REQUIRE((x == 0 || std::abs(x - 1 / 0.7) < 1e-15));
    kept += x != 0;
  }
  BOOST_TEST(std::abs(kept / double(out.size()) - 0.7) < 0.005);
}

BOOST_AUTO_TEST_SUITE_END()
