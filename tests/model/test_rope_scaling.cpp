// rope_scaling (Llama 3.1/3.2's "llama3", "linear", "yarn" (Qwen2.5's long context) and
// "dynamic"): the inverse frequencies and yarn's cos/sin factor match those transformers
// computes (tests/fixtures/model/make_rope_fixture.py transcribes its formulas apart from
// the C++), the model's rotary tables use them, the config round-trips, and an unknown
// type or key is refused naming the file and field.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "tests/common/input_error.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

using namespace braid;

namespace {

json fixture() { return load_json_file(test::fixture("model/rope_inv_freq.json").string()); }

json config_of(const json& c) {
  return json{{"hidden_size", c["hidden_size"]}, {"intermediate_size", 128}, {"num_hidden_layers", 1},
              {"num_attention_heads", c["num_attention_heads"]}, {"vocab_size", 100},
              {"rope_theta", c["rope_theta"]}, {"rope_scaling", c["rope_scaling"]}};
}

std::string refusal(const json& rope_scaling) {
  json doc = config_of(fixture()[0]);
  doc["rope_scaling"] = rope_scaling;
  return test::error_of([&] { model::parse_config(doc, "config.json"); }, "config.json");
}

}  // namespace

BOOST_AUTO_TEST_CASE(inverse_frequencies_match_transformers) {
  const json cases = fixture();
  BOOST_REQUIRE(cases.size() >= 4);
  for (const auto& c : cases) {
    const model::ModelConfig cfg = model::parse_config(config_of(c), c["name"].get<std::string>());
    BOOST_TEST((cfg.rope_scaling.type != model::RopeScaling::Type::none));
    const auto inv = model::rope_inv_freq(cfg);
    const double factor = c["attention_factor"].get<double>();
    BOOST_TEST(std::abs(model::rope_attention_factor(cfg) - factor) <= 1e-12 * factor, c["name"].get<std::string>());
    const auto& want = c["inv_freq"];
    BOOST_REQUIRE_EQUAL(inv.size(), want.size());
    for (std::size_t j = 0; j < inv.size(); ++j) {
      const double w = want[j].get<double>();
      BOOST_TEST(std::abs(inv[j] - w) <= 1e-12 * w, c["name"].get<std::string>() << " inv_freq[" << j << "] = "
                                                                                << inv[j] << ", transformers " << w);
    }
  }
}

BOOST_AUTO_TEST_CASE(llama3_keeps_high_divides_low_and_blends_between) {
  // Llama 3.1 8B: the fastest frequency is kept, the slowest divided by factor 8, and a
  // wavelength between 8192/4 and 8192 lies strictly between the two.
  const model::ModelConfig cfg = model::parse_config(config_of(fixture()[0]), "config.json");
  model::ModelConfig plain = cfg;
  plain.rope_scaling = {};
  const auto scaled = model::rope_inv_freq(cfg);
  const auto base = model::rope_inv_freq(plain);
  BOOST_TEST(scaled.front() == base.front());
  BOOST_TEST(std::abs(scaled.back() - base.back() / 8.0) <= 1e-15 * base.back());
  int blended = 0;
  for (std::size_t j = 0; j < base.size(); ++j) {
    const double wavelen = 2 * std::numbers::pi / base[j];
    if (wavelen >= 2048 && wavelen <= 8192) {
      BOOST_TEST(scaled[j] < base[j]);
      BOOST_TEST(scaled[j] > base[j] / 8.0);
      ++blended;
    }
  }
  BOOST_TEST(blended > 0);
}

BOOST_AUTO_TEST_CASE(rope_scaling_round_trips_through_config_json) {
  for (const auto& c : fixture()) {
    const model::ModelConfig cfg = model::parse_config(config_of(c), "config.json");
    const json written = model::config_to_json(cfg);
    BOOST_TEST(written["rope_scaling"]["rope_type"] == (c["rope_scaling"].contains("rope_type")
                                                            ? c["rope_scaling"]["rope_type"]
                                                            : c["rope_scaling"]["type"]));
    const model::ModelConfig back = model::parse_config(written, "written.json");
    BOOST_TEST(model::config_to_json(back) == written);
    BOOST_TEST((model::rope_inv_freq(back) == model::rope_inv_freq(cfg)));
  }
  json none = config_of(fixture()[0]);
  none.erase("rope_scaling");
  BOOST_TEST(model::config_to_json(model::parse_config(none, "config.json"))["rope_scaling"].is_null());
  none["rope_scaling"] = json{{"rope_type", "default"}};
  BOOST_TEST((model::parse_config(none, "config.json").rope_scaling.type == model::RopeScaling::Type::none));
}

BOOST_AUTO_TEST_CASE(bad_rope_scaling_is_refused_naming_the_field) {
  BOOST_TEST(refusal(json{{"rope_type", "longrope"}, {"factor", 4.0}}).find("config.json: rope_scaling.rope_type:") == 0);
  BOOST_TEST(refusal(json{{"type", "ntk"}, {"factor", 4.0}}).find("config.json: rope_scaling.type:") == 0);
  BOOST_TEST(refusal(json{{"rope_type", "yarn"}, {"factor", 4.0}, {"short_factor", 1.0}}).find("rope_scaling.short_factor") !=
             std::string::npos);
  BOOST_TEST(refusal(json{{"rope_type", "llama3"}, {"factor", 8.0}}).find("rope_scaling.low_freq_factor") !=
             std::string::npos);
  BOOST_TEST(refusal(json{{"rope_type", "linear"}, {"factor", 0.5}}).find("rope_scaling.factor") != std::string::npos);
  BOOST_TEST(refusal(json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
                          {"original_max_position_embeddings", 8192}})
                 .find("rope_scaling.high_freq_factor: must be greater") != std::string::npos);
  BOOST_TEST(refusal(json{{"rope_type", "linear"}, {"factor", 2.0}, {"attention_factor", 2.0}})
                 .find("rope_scaling") != std::string::npos);
  BOOST_TEST(refusal(json("llama3")).find("config.json: rope_scaling:") == 0);
}

// The model's rotary tables come from rope_inv_freq: linear factor 1 changes nothing, bit
// for bit; factor 4 changes the hidden states of a sequence (whose tokens' relative
// positions then turn by a quarter of the angle).
BOOST_AUTO_TEST_CASE(the_model_rotates_by_the_scaled_frequencies) {
  auto be = backend::make_cpu_backend(1);
  model::ModelConfig cfg = test::tiny_config({.hidden = 8, .layers = 1, .heads = 2, .kv_heads = 1, .intermediate = 12,
                                              .vocab = 11, .positions = 16, .rope_theta = 100.0});
  const std::vector<std::int32_t> tokens{1, 5, 2, 9, 3, 7, 0, 4};
  const std::vector<std::int64_t> offsets{0, 8};
  auto hidden = [&](model::RopeScaling r) {
    cfg.rope_scaling = r;
    model::BasicModel<double> m(cfg, {.lm_head = true}, *be);
    m.init_random(5, 0.5);
    auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 1, .training = false});
    m.forward({tokens, offsets}, acts);
    return std::vector<double>(acts.output(), acts.output() + 8 * cfg.hidden_size);
  };
  const auto plain = hidden({});
  BOOST_TEST((hidden({.type = model::RopeScaling::Type::linear, .factor = 1.0}) == plain));
  const auto scaled = hidden({.type = model::RopeScaling::Type::linear, .factor = 4.0});
  // The first token attends to itself only: no relative angle, the same state.
  for (int d = 0; d < cfg.hidden_size; ++d) BOOST_TEST(std::abs(scaled[std::size_t(d)] - plain[std::size_t(d)]) < 1e-12);
  double diff = 0;
  for (std::size_t i = std::size_t(cfg.hidden_size); i < plain.size(); ++i) diff = std::max(diff, std::abs(scaled[i] - plain[i]));
  BOOST_TEST(diff > 1e-6);
}
