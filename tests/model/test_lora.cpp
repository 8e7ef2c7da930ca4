// LoRA adapters (model/lora.hpp): their gradients against finite differences and against the
// direct computation from the merged weight's gradient (dA = s·Bᵀ·G, dB = s·G·Aᵀ), in double
// precision on every family's pieces; merged and unmerged models giving the same logits and
// greedy tokens; adapters off giving the base model; the options refused when unusable.
#include <boost/test/unit_test.hpp>

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
                                        model::LoraOptions{.rank = 2, .dropout = 0.1},
                                        model::LoraOptions{.rank = 2, .targets = {"lm_head"}}}) {
    BOOST_CHECK_THROW(model::Model(cfg, {.lora = bad}, *be), std::invalid_argument);
  }
  BOOST_CHECK_THROW(model::Model(cfg, {.tp = {2, 0, nullptr}, .lora = lora()}, *be), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
