#include "model/config.hpp"

#include "core/error.hpp"

#include <cmath>
#include <numbers>

namespace braid::model {
namespace {

constexpr double kMaxHidden = 65536;              // 2^16
constexpr double kMaxIntermediate = 1048576;      // 2^20
constexpr double kMaxLayers = 1024;
constexpr double kMaxHeads = 1024;
constexpr double kMaxVocab = 16777216;            // 2^24
constexpr double kMaxPositions = 16777216;        // 2^24

}  // namespace

RopeScaling parse_rope_scaling(const json& doc, Checker& c, std::string_view where) {
  RopeScaling r;
  if (!doc.is_object() || !doc.contains("rope_scaling") || doc["rope_scaling"].is_null()) return r;
  const std::string at = Checker::path(where, "rope_scaling");
  const json& rs = c.object(doc, where, "rope_scaling");
  if (!rs.is_object() || rs.empty()) return r;
  // transformers reads "rope_type", and "type" where an older config names it so.
  const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
  const auto type = c.string(rs, at, type_key, {"default", "linear", "llama3"});
  if (!type) return r;
  const Bounds factor{.min = 1, .max = 1e6};
  if (*type == "default") {
    c.no_unknown_keys(rs, at, {"rope_type", "type"});
  } else if (*type == "linear") {
    c.no_unknown_keys(rs, at, {"rope_type", "type", "factor"});
    r.type = RopeScaling::Type::linear;
    r.factor = c.number(rs, at, "factor", factor).value_or(1.0);
  } else {
    c.no_unknown_keys(rs, at, {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                               "original_max_position_embeddings"});
    r.type = RopeScaling::Type::llama3;
    r.factor = c.number(rs, at, "factor", factor).value_or(1.0);
    r.low_freq_factor = c.number(rs, at, "low_freq_factor", {.min = 0, .max = 1e6, .exclusive_min = true}).value_or(1.0);
    r.high_freq_factor = c.number(rs, at, "high_freq_factor", {.min = 0, .max = 1e6, .exclusive_min = true}).value_or(4.0);
    r.original_max_position_embeddings =
        int(c.integer(rs, at, "original_max_position_embeddings", {.min = 1, .max = kMaxPositions}).value_or(8192));
    if (rs.contains("low_freq_factor") && rs.contains("high_freq_factor") && !(r.high_freq_factor > r.low_freq_factor)) {
      c.fail(Checker::path(at, "high_freq_factor"), "must be greater than low_freq_factor");
    }
  }
  return r;
}

json rope_scaling_to_json(const RopeScaling& r) {
  switch (r.type) {
    case RopeScaling::Type::none: return nullptr;
    case RopeScaling::Type::linear: return json{{"rope_type", "linear"}, {"factor", r.factor}};
    case RopeScaling::Type::llama3:
      return json{{"rope_type", "llama3"},
                  {"factor", r.factor},
                  {"low_freq_factor", r.low_freq_factor},
                  {"high_freq_factor", r.high_freq_factor},
                  {"original_max_position_embeddings", r.original_max_position_embeddings}};
  }
  return nullptr;
}

std::vector<double> rope_inv_freq(const ModelConfig& cfg) {
  const int d = cfg.head_dim();
  std::vector<double> inv(std::size_t(d / 2));
  for (int j = 0; j < d / 2; ++j) inv[std::size_t(j)] = 1.0 / std::pow(cfg.rope_theta, 2.0 * j / d);
  const RopeScaling& r = cfg.rope_scaling;
  if (r.type == RopeScaling::Type::linear) {
    for (double& f : inv) f /= r.factor;
  } else if (r.type == RopeScaling::Type::llama3) {
    // Wavelengths longer than the pretraining context / low_freq_factor are slowed by
    // `factor`, those shorter than context / high_freq_factor kept; between, a blend.
    const double old_len = r.original_max_position_embeddings;
    const double low_wavelen = old_len / r.low_freq_factor;
    const double high_wavelen = old_len / r.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= r.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1.0 - smooth) * f / r.factor + smooth * f;
      }
    }
  }
  return inv;
}

ModelConfig parse_config(const json& doc, const std::string& origin) {
  Checker c(origin);
  ModelConfig cfg;
  if (!doc.is_object()) {
    c.fail("", "expected a JSON object (a Hugging Face config.json)");
    c.check();
  }
  // Sane ranges (docs/formats.md): past them a size is a typo, and would overflow the
  // model's int sizes and element counts rather than describe a model braid can hold.
  const Bounds positive{.min = 1};
  const Bounds heads{.min = 1, .max = kMaxHeads};
  cfg.hidden_size = int(c.integer(doc, "", "hidden_size", {.min = 1, .max = kMaxHidden}).value_or(0));
  cfg.num_hidden_layers = int(c.integer(doc, "", "num_hidden_layers", {.min = 1, .max = kMaxLayers}).value_or(0));
  cfg.num_attention_heads = int(c.integer(doc, "", "num_attention_heads", heads).value_or(0));
  cfg.num_key_value_heads =
      int(c.integer(doc, "", "num_key_value_heads", heads, cfg.num_attention_heads).value_or(0));
  cfg.intermediate_size =
      int(c.integer(doc, "", "intermediate_size", {.min = 1, .max = kMaxIntermediate}).value_or(0));
  cfg.vocab_size = int(c.integer(doc, "", "vocab_size", {.min = 1, .max = kMaxVocab}).value_or(0));
  cfg.rms_norm_eps =
      c.number(doc, "", "rms_norm_eps", {.min = 0, .max = 1, .exclusive_min = true}, 1e-6).value_or(1e-6);
  cfg.rope_theta =
      c.number(doc, "", "rope_theta", {.min = 0, .max = 1e12, .exclusive_min = true}, 10000.0).value_or(1e4);
  cfg.max_position_embeddings =
      int(c.integer(doc, "", "max_position_embeddings", {.min = 1, .max = kMaxPositions}, 2048).value_or(2048));
  cfg.tie_word_embeddings = c.boolean(doc, "", "tie_word_embeddings", false).value_or(false);

  if (cfg.num_attention_heads > 0 && cfg.hidden_size > 0) {
    if (cfg.hidden_size % cfg.num_attention_heads != 0)
      c.fail("hidden_size", "must be a multiple of num_attention_heads");
    else if (cfg.head_dim() % 2 != 0)
      c.fail("hidden_size", "hidden_size / num_attention_heads (the head size) must be even for rotary embeddings");
  }
  if (cfg.num_key_value_heads > 0 && cfg.num_attention_heads % cfg.num_key_value_heads != 0)
    c.fail("num_key_value_heads", "must divide num_attention_heads");
  if (doc.contains("head_dim") && !doc["head_dim"].is_null() && cfg.num_attention_heads > 0) {
    const auto hd = c.integer(doc, "", "head_dim", positive);
    if (hd && *hd != cfg.head_dim())
      c.fail("head_dim", "only head_dim = hidden_size / num_attention_heads is supported");
  }
  if (doc.contains("hidden_act")) {
    c.string(doc, "", "hidden_act", {"silu"});
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (doc.contains(key) && c.boolean(doc, "", key).value_or(false))
      c.fail(key, "biases in attention or MLP projections are not supported");
  }
  cfg.rope_scaling = parse_rope_scaling(doc, c);
  if (doc.contains("model_type") && doc["model_type"].is_string() && doc["model_type"] != "llama")
    c.fail("model_type", "expected \"llama\"");
  c.check();
  return cfg;
}

ModelConfig load_config(const std::string& path) { return parse_config(load_json_file(path), path); }

json config_to_json(const ModelConfig& cfg) {
  return json{
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"hidden_size", cfg.hidden_size},
      {"num_hidden_layers", cfg.num_hidden_layers},
      {"num_attention_heads", cfg.num_attention_heads},
      {"num_key_value_heads", cfg.num_key_value_heads},
      {"intermediate_size", cfg.intermediate_size},
      {"vocab_size", cfg.vocab_size},
      {"rms_norm_eps", cfg.rms_norm_eps},
      {"rope_theta", cfg.rope_theta},
      {"max_position_embeddings", cfg.max_position_embeddings},
      {"tie_word_embeddings", cfg.tie_word_embeddings},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"rope_scaling", rope_scaling_to_json(cfg.rope_scaling)},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"},
  };
}

}  // namespace braid::model
