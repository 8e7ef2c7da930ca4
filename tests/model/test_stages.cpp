// A model split into pipeline stages computes what the whole model computes: the same
// outputs forward and the same parameter gradients backward, with activations and
// gradients handed over at the stage boundaries.
#include <boost/test/unit_test.hpp>

#include "tiny_model.hpp"

#include <cstring>
#include <map>

using namespace braid;

namespace {

using DModel = model::BasicModel<double>;

void copy_weights(DModel& from, DModel& to) {
  for (auto& t : to.tensors()) {
    auto* src = from.find(t.name);
    BOOST_REQUIRE_MESSAGE(src, "no tensor " << t.name << " in the whole model");
    std::memcpy(t.data, src->data, std::size_t(t.numel) * sizeof(double));
  }
}

void check_split(bool tied, std::vector<int> cuts) {
  auto backend = backend::make_cpu_backend(1);
  auto cfg = test::grad_config(tied);
  cfg.num_hidden_layers = 4;
  const model::ModelOptions heads{.lm_head = true, .value_head = true};
  DModel whole(cfg, heads, *backend);
  whole.init_random(11, 0.5);
  test::TinyBatch tb;
  const auto targets = tb.targets();
  const test::LossWeights w(targets.size());
  rl::ChunkedLmHead<double> head(*backend, cfg.vocab_size, cfg.hidden_size, 4);
  const model::ActivationOptions ao{.max_tokens = 8, .max_sequences = 2, .training = true};

  auto acts = whole.make_activations(ao);
  whole.zero_grad();
  whole.forward(tb.batch(), acts);
  const double loss_whole = test::head_loss(whole, acts, head, targets, w, true);
  whole.backward(acts);

  std::vector<DModel> stages;
  std::vector<model::BasicActivations<double>> sacts;
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
    model::ModelOptions o = heads;
    o.layers = {cuts[s], cuts[s + 1]};
    stages.emplace_back(cfg, o, *backend);
    copy_weights(whole, stages.back());
    stages.back().zero_grad();
    sacts.push_back(stages.back().make_activations(ao));
  }
  const std::size_t n = stages.size(), rows = 8 * std::size_t(cfg.hidden_size);
  for (std::size_t s = 0; s < n; ++s) {
    if (s > 0) std::memcpy(sacts[s].input(), sacts[s - 1].output(), rows * sizeof(double));
    stages[s].forward(tb.batch(), sacts[s]);
  }
  const double loss_staged = test::head_loss(stages[n - 1], sacts[n - 1], head, targets, w, true);
  BOOST_CHECK_CLOSE(loss_staged, loss_whole, 1e-10);
  for (std::size_t s = n; s-- > 0;) {
    if (s + 1 < n) std::memcpy(sacts[s].output_grad(), sacts[s + 1].input_grad(), rows * sizeof(double));
    stages[s].backward(sacts[s]);
  }

  // Every tensor's gradient matches; a tied embedding's gradient is the sum of the first
  // stage's (input) and the last stage's (LM head) copies.
  std::map<std::string, std::vector<double>> staged;
  for (auto& st : stages)
    for (auto& t : st.tensors()) {
      auto& g = staged[t.name];
      g.resize(std::size_t(t.numel), 0.0);
      for (std::int64_t i = 0; i < t.numel; ++i) g[std::size_t(i)] += t.grad[i];
    }
  BOOST_CHECK_EQUAL(staged.size(), whole.tensors().size());
  for (auto& t : whole.tensors()) {
    const auto& g = staged.at(t.name);
    double worst = 0;
    for (std::int64_t i = 0; i < t.numel; ++i)
      worst = std::max(worst, std::abs(g[std::size_t(i)] - t.grad[i]) / (1e-12 + std::abs(t.grad[i])));
    BOOST_CHECK_MESSAGE(worst < 1e-9, t.name << ": staged gradient differs, worst relative error " << worst);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stages)

BOOST_AUTO_TEST_CASE(two_stages) { check_split(false, {0, 2, 4}); }
BOOST_AUTO_TEST_CASE(four_uneven_stages_tied) { check_split(true, {0, 1, 3, 4}); }

BOOST_AUTO_TEST_CASE(stage_layout) {
  auto backend = backend::make_cpu_backend(1);
  auto cfg = test::grad_config(false);
  cfg.num_hidden_layers = 4;
  DModel mid(cfg, {.layers = {1, 3}}, *backend);
  BOOST_CHECK(!mid.is_first_stage());
  BOOST_CHECK(!mid.is_last_stage());
  BOOST_CHECK(mid.find("model.embed_tokens.weight") == nullptr);
  BOOST_CHECK(mid.find("lm_head.weight") == nullptr);
  BOOST_CHECK(mid.find("model.layers.0.input_layernorm.weight") == nullptr);
  BOOST_REQUIRE(mid.find("model.layers.2.mlp.down_proj.weight") != nullptr);
  BOOST_CHECK((mid.find("model.layers.2.mlp.down_proj.weight")->shape == std::vector<std::int64_t>{8, 12}));
  BOOST_CHECK(mid.find("model.layers.1.self_attn.k_proj.weight")->shape == (std::vector<std::int64_t>{4, 8}));
  BOOST_CHECK_EQUAL(mid.parameter_count(), model::parameter_count(cfg, {.layers = {1, 3}}));
  BOOST_CHECK_THROW(DModel(cfg, {.layers = {2, 5}}, *backend), std::invalid_argument);

  // The same seed gives a tensor the same values whatever the split.
  DModel whole(cfg, {}, *backend);
  whole.init_random(3);
  mid.init_random(3);
  auto* a = whole.find("model.layers.2.self_attn.q_proj.weight");
  auto* b = mid.find("model.layers.2.self_attn.q_proj.weight");
  BOOST_CHECK(std::equal(a->data, a->data + a->numel, b->data));
}

BOOST_AUTO_TEST_SUITE_END()
