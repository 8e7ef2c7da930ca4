// The model families beyond Llama (docs/models.md), on tiny configs with their quirks on
// (tests/model/family_configs.hpp): what each config parses to, the whole model's gradient
// against finite differences in double precision (biases, q/k norms, GeGLU, Gemma's norms
// and soft-caps, sliding windows and each rope included), and KV-cache decoding against the
// full forward. The values against an independent reference are test_family_parity's.
#include <boost/test/unit_test.hpp>

#include "family_configs.hpp"
#include "tiny_model.hpp"

#include <algorithm>
#include <cmath>

using namespace braid;
using braid::test::check_gradient;

namespace {

// Every tensor random, norms and biases too (init_random leaves biases at 0 and gains at 1).
template <typename T>
void randomize(model::BasicModel<T>& m, std::uint64_t seed) {
  m.init_random(seed, 0.5);
  for (auto& t : m.tensors()) {
    if (t.shape.size() != 1) continue;
    const auto v = test::random_values(std::size_t(t.numel), unsigned(seed + std::size_t(t.numel)), 0.5);
    std::vector<T> host(v.begin(), v.end());
    if (t.name.find("norm") != std::string::npos && m.config().norm_weight_offset == 0)
      for (T& x : host) x += T(1);   // gains near one
    model::write_values(m.backend(), t, host.data());
  }
}

// Sequences longer than every test config's sliding window.
struct LongBatch {
  std::vector<std::int32_t> tokens{1, 5, 2, 9, 3, 7, 0, 4, 11, 6, 8, 2};
  std::vector<std::int64_t> offsets{0, 7, 12};
  model::Batch batch() const { return {tokens, offsets}; }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(families)

BOOST_AUTO_TEST_CASE(configs_parse_with_their_quirks) {
  const auto fams = test::family_configs();
  BOOST_REQUIRE_EQUAL(fams.size(), 6u);
  const model::ModelConfig llama = fams[0].parsed(), mistral = fams[1].parsed(), qwen2 = fams[2].parsed(),
                           qwen3 = fams[3].parsed(), gemma2 = fams[4].parsed(), gemma3 = fams[5].parsed();
  BOOST_TEST(llama.qkv_bias);
  BOOST_TEST(llama.o_bias);
  BOOST_TEST(llama.mlp_bias);
  BOOST_TEST(llama.head_dim() == 6);
  BOOST_TEST((llama.rope_scaling.type == model::RopeScaling::Type::yarn));
  BOOST_TEST(mistral.sliding_window == 3);
  BOOST_TEST((mistral.sliding_layers == std::vector<std::uint8_t>{1, 1, 1}));
  BOOST_TEST((qwen2.qkv_bias && !qwen2.o_bias && qwen2.tie_word_embeddings));
  BOOST_TEST((qwen2.sliding_layers == std::vector<std::uint8_t>{0, 1, 1}));
  BOOST_TEST((qwen3.qk_norm && !qwen3.qkv_bias && qwen3.norm_weight_offset == 0));
  BOOST_TEST((gemma2.hidden_act == model::Activation::gelu_tanh));
  BOOST_TEST((gemma2.sandwich_norms && gemma2.scale_embeddings && gemma2.norm_weight_offset == 1.0));
  BOOST_TEST(gemma2.tie_word_embeddings);  // Gemma's default
  BOOST_TEST((gemma2.sliding_layers == std::vector<std::uint8_t>{1, 0, 1}));
  BOOST_TEST(gemma2.attention_scale() == 1.0 / std::sqrt(5.0));
  BOOST_TEST((gemma3.qk_norm && gemma3.has_local_rope() && gemma3.rope_local_theta == 50.0));
  BOOST_TEST((gemma3.sliding_layers == std::vector<std::uint8_t>{1, 0, 1}));
  BOOST_TEST(gemma3.attn_logit_softcapping == 0.0);
  // The local RoPE has no scaling, the global one its factor.
  BOOST_TEST(model::rope_inv_freq(gemma3, true)[1] == std::pow(50.0, -2.0 / 6));
  BOOST_TEST(model::rope_inv_freq(gemma3, false)[1] == std::pow(1000.0, -2.0 / 6) / 2.0);
  // Each family's config round-trips through config_to_json, which names its class.
  for (const auto& f : fams) {
    const model::ModelConfig cfg = f.parsed();
    const json written = model::config_to_json(cfg);
    BOOST_TEST(written["model_type"] == f.config["model_type"], f.name);
    BOOST_TEST(model::config_to_json(model::parse_config(written, "written")) == written, f.name);
  }
}

BOOST_AUTO_TEST_CASE(whole_model_gradients) {
  auto be = backend::make_cpu_backend(1);
  LongBatch lb;
  const auto targets = rl::next_token_targets(lb.batch());
  const test::LossWeights w(targets.size());
  for (const auto& f : test::family_configs()) {
    BOOST_TEST_CONTEXT(f.name) {
      const model::ModelConfig cfg = f.parsed();
      model::BasicModel<double> m(cfg, {.lm_head = true, .value_head = true, .value_bias = true}, *be);
      randomize(m, 11);
      auto acts = m.make_activations({.max_tokens = 12, .max_sequences = 2, .training = true});
      rl::ChunkedLmHead<double> head(m, /*chunk_rows*/ 5);   // the model's final soft-cap
      m.zero_grad();
      m.forward(lb.batch(), acts);
      test::head_loss(m, acts, head, targets, w, true);
      m.backward(acts);
      const std::vector<double> grads(m.gradients().begin(), m.gradients().end());
      auto loss = [&] {
        m.forward(lb.batch(), acts);
        return test::head_loss(m, acts, head, targets, w, false);
      };
      for (auto& t : m.tensors()) {
        // A spread of entries of each tensor (every one of the small ones).
        std::vector<std::size_t> which;
        const std::size_t step = std::max<std::size_t>(1, std::size_t(t.numel) / 24);
        for (std::size_t i = 0; i < std::size_t(t.numel); i += step) which.push_back(i);
        const std::size_t off = std::size_t(t.data - m.parameters().data());
        // atol 1e-7: central differences of this deeper stack (caps, yarn) err by ~3e-8.
        check_gradient(t.name, t.data, std::size_t(t.numel), grads.data() + off, loss, which, 1e-5, 1e-7, 1e-6);
      }
    }
  }
}

// Two sequences prefilled in part, then decoded a token a step (past every sliding window),
// give the full forward's logits.
BOOST_AUTO_TEST_CASE(kv_cache_decoding_matches_the_full_forward) {
  auto be = backend::make_cpu_backend(1);
  LongBatch lb;
  for (const auto& f : test::family_configs()) {
    BOOST_TEST_CONTEXT(f.name) {
      const model::ModelConfig cfg = f.parsed();
      model::BasicModel<double> m(cfg, {.lm_head = true}, *be);
      randomize(m, 5);
      const std::int64_t V = cfg.vocab_size, N = 12;
      auto full = m.make_activations({.max_tokens = N, .max_sequences = 2});
      m.forward(lb.batch(), full);
      std::vector<double> want(std::size_t(N * V));
      m.lm_logits(full.output(), N, want.data());

      auto cache = m.make_kv_cache(2, 16);
      auto acts = m.make_activations({.max_tokens = N, .max_sequences = 2});
      const std::int32_t* t = lb.tokens.data();
      // Prefill 3 tokens of sequence 0 and 2 of sequence 1, then one token each a step.
      std::vector<std::int32_t> step{t[0], t[1], t[2], t[7], t[8]};
      std::vector<model::Segment> segs{{0, 3}, {1, 2}};
      std::int64_t len0 = 3, len1 = 2;
      double worst = 0;
      for (int s = 0; s < 4; ++s) {
        if (s > 0) {
          step = {t[len0], t[7 + len1]};
          segs = {{0, 1}, {1, 1}};
          ++len0;
          ++len1;
        }
        m.forward_cached(step, segs, cache, acts);
        std::vector<double> got(segs.size() * std::size_t(V));
        be->copy_to_host(got.data(), acts.logits(), got.size() * sizeof(double));
        const std::int64_t rows[] = {len0 - 1, 7 + len1 - 1};
        for (std::size_t i = 0; i < segs.size(); ++i)
          for (std::int64_t j = 0; j < V; ++j)
            worst = std::max(worst, std::abs(got[i * std::size_t(V) + std::size_t(j)] -
                                             want[std::size_t(rows[i] * V + j)]));
      }
      BOOST_TEST_MESSAGE(f.name << ": worst |cached − full| logit " << worst);
      BOOST_TEST(worst < 1e-10);
    }
  }
}

// The quirks change the numbers: the same weights with each family's pieces taken away
// give other logits (a test of the tests: an ignored window, cap or norm would pass above).
BOOST_AUTO_TEST_CASE(each_quirk_changes_the_logits) {
  auto be = backend::make_cpu_backend(1);
  LongBatch lb;
  const model::ModelConfig gemma2 = test::family_configs()[4].parsed();
  auto logits = [&](const model::ModelConfig& cfg) {
    model::BasicModel<double> m(cfg, {.lm_head = true}, *be);
    randomize(m, 3);
    auto acts = m.make_activations({.max_tokens = 12, .max_sequences = 2});
    m.forward(lb.batch(), acts);
    std::vector<double> out(std::size_t(12 * cfg.vocab_size));
    m.lm_logits(acts.output(), 12, out.data());
    return out;
  };
  const auto base = logits(gemma2);
  auto differs = [&](model::ModelConfig cfg) {
    const auto other = logits(cfg);
    double d = 0;
    for (std::size_t i = 0; i < base.size(); ++i) d = std::max(d, std::abs(other[i] - base[i]));
    return d > 1e-6;
  };
  model::ModelConfig c = gemma2;
  c.sliding_window = 0;
  c.sliding_layers.clear();
  BOOST_TEST(differs(c));
  c = gemma2;
  c.attn_logit_softcapping = 0;
  BOOST_TEST(differs(c));
  c = gemma2;
  c.final_logit_softcapping = 0;
  BOOST_TEST(differs(c));
  c = gemma2;
  c.query_pre_attn_scalar = 0;
  BOOST_TEST(differs(c));
  c = gemma2;
  c.scale_embeddings = false;
  BOOST_TEST(differs(c));
}

BOOST_AUTO_TEST_SUITE_END()
