#include "model/config.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
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

// What a family's config class takes when config.json leaves a key out (transformers'
// defaults), and the keys it has beyond the common ones.
struct FamilyInfo {
  Family family;
  std::string_view model_type, prefix;
  int kv_heads = 0;                  // 0: num_attention_heads
  int head_dim = 0;                  // 0: hidden_size / num_attention_heads
  bool tie = false;
  double rope_theta = 10000.0;
  int max_positions = 2048;
  int sliding_window = 0;            // the key's default (qwen: when use_sliding_window)
  double attn_softcap = 0, final_softcap = 0;
  std::vector<std::string> keys;
};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> all = {
      {Family::llama, "llama", "Llama", 0, 0, false, 10000.0, 2048, 0, 0, 0,
       {"attention_bias", "mlp_bias", "pretraining_tp"}},
      {Family::mistral, "mistral", "Mistral", 8, 0, false, 10000.0, 131072, 4096, 0, 0,
       {"sliding_window", "layer_types"}},
      {Family::qwen2, "qwen2", "Qwen2", 32, 0, false, 10000.0, 32768, 4096, 0, 0,
       {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
      {Family::qwen3, "qwen3", "Qwen3", 32, 128, false, 10000.0, 32768, 4096, 0, 0,
       {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
      {Family::gemma2, "gemma2", "Gemma2", 4, 256, true, 10000.0, 8192, 4096, 50.0, 30.0,
       {"hidden_activation", "attention_bias", "query_pre_attn_scalar", "attn_logit_softcapping",
        "final_logit_softcapping", "sliding_window", "sliding_window_size", "cache_implementation", "layer_types"}},
      {Family::gemma3, "gemma3_text", "Gemma3", 4, 256, true, 1000000.0, 131072, 4096, 0, 0,
       {"hidden_activation", "attention_bias", "query_pre_attn_scalar", "attn_logit_softcapping",
        "final_logit_softcapping", "sliding_window", "sliding_window_pattern", "_sliding_window_pattern",
        "rope_local_base_freq", "cache_implementation", "layer_types", "use_bidirectional_attention"}},
  };
  return all;
}

const FamilyInfo& info_of(Family f) {
  for (const FamilyInfo& i : families()) {
    if (i.family == f) return i;
  }
  throw std::logic_error("no such model family");
}

// Keys of any transformers config that do not change a decoder's maths, and the shape keys
// every family reads.
const std::vector<std::string>& common_keys() {
  static const std::vector<std::string> keys = {
      "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "_name_or_path",
      "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "use_cache", "id2label", "label2id",
      "num_labels", "problem_type", "classifier_dropout", "output_attentions", "output_hidden_states",
      "return_dict", "tokenizer_class", "hidden_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads", "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta", "rope_scaling",
      "rope_parameters", "max_position_embeddings", "tie_word_embeddings", "head_dim", "hidden_act",
      "attention_dropout"};
  return keys;
}

bool present(const json& doc, std::string_view key) {
  return doc.is_object() && doc.contains(std::string(key)) && !doc[std::string(key)].is_null();
}

// Refuses every key of `doc` outside `known`, naming it (a key braid does not implement is
// never passed over: the model would run with other maths than its own).
void refuse_unknown_keys(const json& doc, Checker& c, std::string_view where, const std::vector<std::string>& known,
                         std::string_view what) {
  if (!doc.is_object()) return;
  for (const auto& [k, _] : doc.items()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    c.fail(Checker::path(where, k),
           fmt::format("not a key braid reads for {}: refused rather than ignored (docs/models.md)", what));
  }
}

// A gelu or silu activation name as the family takes it.
Activation read_activation(const json& doc, Checker& c, std::string_view key, Family f) {
  const bool gemma = f == Family::gemma2 || f == Family::gemma3;
  const std::string want = gemma ? "gelu_pytorch_tanh" : "silu";
  if (present(doc, key)) c.string(doc, "", key, {want});
  return gemma ? Activation::gelu_tanh : Activation::silu;
}

// One RoPE description: a rope_scaling object, or one of transformers 5's rope_parameters
// (which also holds rope_theta).
struct Rope {
  double theta = 10000.0;
  RopeScaling scaling;
};

RopeScaling parse_rope_object(const json& rs, Checker& c, const std::string& at, int max_positions,
                              const std::vector<std::string>& extra_keys) {
  RopeScaling r;
  // transformers reads "rope_type", and "type" where an older config names it so.
  const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
  const auto type = c.string(rs, at, type_key, {"default", "linear", "dynamic", "yarn", "llama3"});
  if (!type) return r;
  auto allow = [&](std::vector<std::string> keys) {
    keys.insert(keys.end(), {"rope_type", "type"});
    keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
    c.no_unknown_keys(rs, at, keys);
  };
  const Bounds factor{.min = 1, .max = 1e6};
  const Bounds positive{.min = 0, .max = 1e6, .exclusive_min = true};
  if (*type == "default") {
    allow({});
  } else if (*type == "linear" || *type == "dynamic") {
    allow({"factor"});
    r.type = *type == "linear" ? RopeScaling::Type::linear : RopeScaling::Type::dynamic;
    r.factor = c.number(rs, at, "factor", factor).value_or(1.0);
  } else if (*type == "yarn") {
    allow({"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
           "mscale_all_dim", "truncate"});
    r.type = RopeScaling::Type::yarn;
    r.factor = c.number(rs, at, "factor", factor).value_or(1.0);
    r.original_max_position_embeddings = present(rs, "original_max_position_embeddings")
        ? int(c.integer(rs, at, "original_max_position_embeddings", {.min = 1, .max = kMaxPositions}).value_or(1))
        : max_positions;
    if (present(rs, "attention_factor")) r.attention_factor = c.number(rs, at, "attention_factor", positive).value_or(1.0);
    // transformers: `get("beta_fast") or 32`, so 0 and null mean the default too.
    if (present(rs, "beta_fast")) r.beta_fast = c.number(rs, at, "beta_fast", {.min = 0, .max = 1e6}).value_or(32);
    if (present(rs, "beta_slow")) r.beta_slow = c.number(rs, at, "beta_slow", {.min = 0, .max = 1e6}).value_or(1);
    if (r.beta_fast == 0) r.beta_fast = 32;
    if (r.beta_slow == 0) r.beta_slow = 1;
    if (present(rs, "mscale")) r.mscale = c.number(rs, at, "mscale", {.min = 0, .max = 1e6}).value_or(0);
    if (present(rs, "mscale_all_dim")) r.mscale_all_dim = c.number(rs, at, "mscale_all_dim", {.min = 0, .max = 1e6}).value_or(0);
    if (present(rs, "truncate")) r.truncate = c.boolean(rs, at, "truncate").value_or(true);
  } else {
    allow({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
    r.type = RopeScaling::Type::llama3;
    r.factor = c.number(rs, at, "factor", factor).value_or(1.0);
    r.low_freq_factor = c.number(rs, at, "low_freq_factor", positive).value_or(1.0);
    r.high_freq_factor = c.number(rs, at, "high_freq_factor", positive).value_or(4.0);
    r.original_max_position_embeddings =
        int(c.integer(rs, at, "original_max_position_embeddings", {.min = 1, .max = kMaxPositions}).value_or(8192));
    if (rs.contains("low_freq_factor") && rs.contains("high_freq_factor") && !(r.high_freq_factor > r.low_freq_factor)) {
      c.fail(Checker::path(at, "high_freq_factor"), "must be greater than low_freq_factor");
    }
  }
  return r;
}

// transformers 5's rope_parameters: {rope_type, rope_theta, ...}, or one such object per
// layer type ({"full_attention": ..., "sliding_attention": ...}).
void parse_rope_parameters(const json& doc, Checker& c, int max_positions, double default_theta, Rope& global,
                           Rope& local, bool& has_local) {
  const json& rp = c.object(doc, "", "rope_parameters");
  auto one = [&](const json& obj, const std::string& at, Rope& out) {
    if (!obj.is_object()) {
      c.fail(at, "expected an object");
      return;
    }
    out.theta = c.number(obj, at, "rope_theta", {.min = 0, .max = 1e12, .exclusive_min = true}, default_theta)
                    .value_or(default_theta);
    if (present(obj, "partial_rotary_factor")) {
      const auto p = c.number(obj, at, "partial_rotary_factor");
      if (p && *p != 1.0) c.fail(Checker::path(at, "partial_rotary_factor"), "only 1 (RoPE on the whole head) is supported");
    }
    out.scaling = parse_rope_object(obj, c, at, max_positions, {"rope_theta", "partial_rotary_factor"});
  };
  if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
    c.no_unknown_keys(rp, "rope_parameters", {"full_attention", "sliding_attention"});
    if (rp.contains("full_attention")) one(rp["full_attention"], "rope_parameters.full_attention", global);
    if (rp.contains("sliding_attention")) {
      one(rp["sliding_attention"], "rope_parameters.sliding_attention", local);
      has_local = true;
    }
  } else {
    one(rp, "rope_parameters", global);
  }
}

// Which layers attend over a sliding window: layer_types where given, else the family's rule.
std::vector<std::uint8_t> sliding_layers_of(const json& doc, Checker& c, Family f, int layers, int window,
                                            int max_window_layers, int pattern) {
  std::vector<std::uint8_t> out(std::size_t(std::max(layers, 0)), 0);
  if (present(doc, "layer_types")) {
    const json& lt = doc["layer_types"];
    if (!lt.is_array() || int(lt.size()) != layers) {
      c.fail("layer_types", fmt::format("expected a list of num_hidden_layers ({}) layer types", layers));
      return out;
    }
    for (std::size_t i = 0; i < lt.size(); ++i) {
      if (lt[i] == "sliding_attention") {
        out[i] = 1;
      } else if (lt[i] != "full_attention") {
        c.fail(fmt::format("layer_types[{}]", i), "expected \"full_attention\" or \"sliding_attention\"");
      }
    }
    // A sliding layer without a window attends to every key (transformers: window None).
    if (window <= 0) std::fill(out.begin(), out.end(), 0);
    return out;
  }
  if (window <= 0) return out;
  for (int l = 0; l < layers; ++l) {
    bool sliding = false;
    switch (f) {
      case Family::llama: break;
      case Family::mistral: sliding = true; break;
      case Family::qwen2:
      case Family::qwen3: sliding = l >= max_window_layers; break;
      case Family::gemma2: sliding = l % 2 == 0; break;
      case Family::gemma3: sliding = (l + 1) % pattern != 0; break;
    }
    out[std::size_t(l)] = sliding;
  }
  return out;
}

}  // namespace

std::string_view model_type_of(Family f) { return info_of(f).model_type; }
std::string_view class_prefix_of(Family f) { return info_of(f).prefix; }

double ModelConfig::attention_scale() const {
  return 1.0 / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : double(head_dim()));
}

bool ModelConfig::is_sliding(int layer) const {
  return sliding_window > 0 && layer >= 0 && std::size_t(layer) < sliding_layers.size() &&
         sliding_layers[std::size_t(layer)] != 0;
}

RopeScaling parse_rope_scaling(const json& doc, Checker& c, std::string_view where, int max_position_embeddings) {
  if (!doc.is_object() || !doc.contains("rope_scaling") || doc["rope_scaling"].is_null()) return {};
  const std::string at = Checker::path(where, "rope_scaling");
  const json& rs = c.object(doc, where, "rope_scaling");
  if (!rs.is_object() || rs.empty()) return {};
  return parse_rope_object(rs, c, at, max_position_embeddings, {});
}

json rope_scaling_to_json(const RopeScaling& r) {
  switch (r.type) {
    case RopeScaling::Type::none: return nullptr;
    case RopeScaling::Type::linear: return json{{"rope_type", "linear"}, {"factor", r.factor}};
    case RopeScaling::Type::dynamic: return json{{"rope_type", "dynamic"}, {"factor", r.factor}};
    case RopeScaling::Type::yarn: {
      json j{{"rope_type", "yarn"},
             {"factor", r.factor},
             {"original_max_position_embeddings", r.original_max_position_embeddings},
             {"beta_fast", r.beta_fast},
             {"beta_slow", r.beta_slow},
             {"truncate", r.truncate}};
      if (r.attention_factor > 0) j["attention_factor"] = r.attention_factor;
      if (r.mscale > 0) j["mscale"] = r.mscale;
      if (r.mscale_all_dim > 0) j["mscale_all_dim"] = r.mscale_all_dim;
      return j;
    }
    case RopeScaling::Type::llama3:
      return json{{"rope_type", "llama3"},
                  {"factor", r.factor},
                  {"low_freq_factor", r.low_freq_factor},
                  {"high_freq_factor", r.high_freq_factor},
                  {"original_max_position_embeddings", r.original_max_position_embeddings}};
  }
  return nullptr;
}

std::vector<double> rope_inv_freq(const ModelConfig& cfg, bool local) {
  const bool own = local && cfg.has_local_rope();
  const double theta = own ? cfg.rope_local_theta : cfg.rope_theta;
  const RopeScaling r = own ? RopeScaling{} : cfg.rope_scaling;
  const int d = cfg.head_dim();
  std::vector<double> inv(std::size_t(d / 2));
  for (int j = 0; j < d / 2; ++j) inv[std::size_t(j)] = 1.0 / std::pow(theta, 2.0 * j / d);
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
  } else if (r.type == RopeScaling::Type::yarn) {
    // Dimensions that turn fewer than beta_slow times over the pretraining context are
    // interpolated (/ factor), those that turn more than beta_fast times kept, a linear
    // ramp between (transformers' find_correction_range and linear_ramp_factor).
    auto correction_dim = [&](double rotations) {
      return d * std::log(r.original_max_position_embeddings / (rotations * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(theta));
    };
    double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
    if (r.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(d - 1));
    if (low == high) high += 0.001;  // as transformers: no singular ramp
    for (int j = 0; j < d / 2; ++j) {
      const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      double& f = inv[std::size_t(j)];
      f = f / r.factor * (1.0 - extrapolation) + f * extrapolation;
    }
  }
  // dynamic: the base grows only past max_position_embeddings, which braid never runs.
  return inv;
}

double rope_attention_factor(const ModelConfig& cfg, bool local) {
  if (local && cfg.has_local_rope()) return 1.0;
  const RopeScaling& r = cfg.rope_scaling;
  if (r.type != RopeScaling::Type::yarn) return 1.0;
  if (r.attention_factor > 0) return r.attention_factor;
  auto mscale = [&](double m) { return r.factor <= 1 ? 1.0 : 0.1 * m * std::log(r.factor) + 1.0; };
  if (r.mscale > 0 && r.mscale_all_dim > 0) return mscale(r.mscale) / mscale(r.mscale_all_dim);
  return mscale(1.0);
}

ModelConfig parse_config(const json& doc, const std::string& origin) {
  Checker c(origin);
  ModelConfig cfg;
  if (!doc.is_object()) {
    c.fail("", "expected a JSON object (a Hugging Face config.json)");
    c.check();
  }
  // The family first: it decides which keys there are and their defaults.
  const FamilyInfo* fam = &info_of(Family::llama);
  if (doc.contains("model_type")) {  // null too: no family is named so
    const json& mt = doc["model_type"];
    const FamilyInfo* found = nullptr;
    for (const FamilyInfo& i : families()) {
      if (mt == i.model_type) found = &i;
    }
    if (found) {
      fam = found;
    } else if (mt == "gemma3") {
      c.fail("model_type", "\"gemma3\" is Gemma3ForConditionalGeneration (text and vision): braid import reads its "
                           "text_config; a config of the text model alone has model_type \"gemma3_text\"");
      c.check();
    } else {
      c.fail("model_type", fmt::format("{} is not a family braid runs (llama, mistral, qwen2, qwen3, gemma2, "
                                       "gemma3_text; docs/models.md)", mt.dump()));
      c.check();
    }
  }
  const Family f = fam->family;
  cfg.family = f;
  const bool gemma = f == Family::gemma2 || f == Family::gemma3;
  std::vector<std::string> known = common_keys();
  known.insert(known.end(), fam->keys.begin(), fam->keys.end());
  refuse_unknown_keys(doc, c, "", known, fmt::format("model_type \"{}\"", fam->model_type));

  if (present(doc, "architectures")) {
    const json& a = doc["architectures"];
    const std::string p(fam->prefix);
    std::vector<std::string> classes{p + "ForCausalLM", p + "ForSequenceClassification", p + "ForTokenClassification"};
    if (f == Family::gemma3) classes = {"Gemma3ForCausalLM", "Gemma3TextForSequenceClassification"};
    bool ok = a.is_array() && !a.empty();
    for (const auto& x : a.is_array() ? a : json::array()) {
      ok = ok && x.is_string() && std::find(classes.begin(), classes.end(), x.get<std::string>()) != classes.end();
    }
    if (!ok) {
      c.fail("architectures", fmt::format("expected one of {} for model_type \"{}\"", json(classes).dump(),
                                          fam->model_type));
    }
  }

  // Sane ranges (docs/formats.md): past them a size is a typo, and would overflow the
  // model's int sizes and element counts rather than describe a model braid can hold.
  const Bounds heads{.min = 1, .max = kMaxHeads};
  cfg.hidden_size = int(c.integer(doc, "", "hidden_size", {.min = 1, .max = kMaxHidden}).value_or(0));
  cfg.num_hidden_layers = int(c.integer(doc, "", "num_hidden_layers", {.min = 1, .max = kMaxLayers}).value_or(0));
  cfg.num_attention_heads = int(c.integer(doc, "", "num_attention_heads", heads).value_or(0));
  const int kv_default = fam->kv_heads > 0 ? fam->kv_heads : cfg.num_attention_heads;
  cfg.num_key_value_heads = present(doc, "num_key_value_heads")
                                ? int(c.integer(doc, "", "num_key_value_heads", heads).value_or(0))
                                : kv_default;
  cfg.intermediate_size =
      int(c.integer(doc, "", "intermediate_size", {.min = 1, .max = kMaxIntermediate}).value_or(0));
  cfg.vocab_size = int(c.integer(doc, "", "vocab_size", {.min = 1, .max = kMaxVocab}).value_or(0));
  // The special ids transformers generates with (braid exports them in generation_config.json):
  // absent, null, or ids of the vocabulary; eos_token_id also a list of them.
  if (cfg.vocab_size > 0) {
    const Bounds id{.min = 0, .max = double(cfg.vocab_size - 1)};
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
      if (!present(doc, key)) continue;
      if (doc[key].is_array() && std::string_view(key) == "eos_token_id") {
        for (const auto& [at, item] : c.array_items(doc, "", key, 1)) {
          if (!item->is_number_integer() || item->get<std::int64_t>() < 0 || item->get<std::int64_t>() >= cfg.vocab_size)
            c.fail(at, fmt::format("must be a token id in [0, {}] (vocab_size - 1)", cfg.vocab_size - 1));
        }
      } else {
        c.integer(doc, "", key, id);
      }
    }
  }
  cfg.rms_norm_eps =
      c.number(doc, "", "rms_norm_eps", {.min = 0, .max = 1, .exclusive_min = true}, 1e-6).value_or(1e-6);
  cfg.max_position_embeddings = int(c.integer(doc, "", "max_position_embeddings", {.min = 1, .max = kMaxPositions},
                                              fam->max_positions)
                                        .value_or(fam->max_positions));
  cfg.tie_word_embeddings = c.boolean(doc, "", "tie_word_embeddings", fam->tie).value_or(fam->tie);
  if (present(doc, "head_dim")) {
    cfg.head_dim_override = int(c.integer(doc, "", "head_dim", {.min = 2, .max = 1024}).value_or(0));
  } else {
    cfg.head_dim_override = fam->head_dim;
  }
  if (cfg.num_attention_heads > 0 && cfg.hidden_size > 0) {
    if (cfg.head_dim_override == 0 && cfg.hidden_size % cfg.num_attention_heads != 0)
      c.fail("hidden_size", "must be a multiple of num_attention_heads (or give head_dim)");
    else if (cfg.head_dim() % 2 != 0)
      c.fail(cfg.head_dim_override ? "head_dim" : "hidden_size",
             "the head size must be even for rotary embeddings");
  }
  if (cfg.num_key_value_heads > 0 && cfg.num_attention_heads % cfg.num_key_value_heads != 0)
    c.fail("num_key_value_heads", "must divide num_attention_heads");
  // transformers computes head_dim as hidden / heads where it is absent: an explicit value
  // equal to it is the same model, written as Llama would.
  if (cfg.head_dim_override > 0 && cfg.num_attention_heads > 0 && cfg.hidden_size % cfg.num_attention_heads == 0 &&
      cfg.head_dim_override == cfg.hidden_size / cfg.num_attention_heads)
    cfg.head_dim_override = 0;

  cfg.hidden_act = read_activation(doc, c, "hidden_act", f);
  if (gemma) read_activation(doc, c, "hidden_activation", f);
  if (present(doc, "attention_dropout")) {
    const auto p = c.number(doc, "", "attention_dropout", {.min = 0, .max = 1});
    if (p && *p != 0) c.fail("attention_dropout", "braid trains without dropout: only 0 is supported");
  }
  if (present(doc, "classifier_dropout")) {
    const auto p = c.number(doc, "", "classifier_dropout", {.min = 0, .max = 1});
    if (p && *p != 0) c.fail("classifier_dropout", "braid trains without dropout: only 0 is supported");
  }

  // Biases.
  const bool attention_bias = present(doc, "attention_bias") && c.boolean(doc, "", "attention_bias").value_or(false);
  cfg.qkv_bias = attention_bias || f == Family::qwen2;   // Qwen2's q, k, v always have one, o never
  cfg.o_bias = attention_bias;
  cfg.mlp_bias = present(doc, "mlp_bias") && c.boolean(doc, "", "mlp_bias").value_or(false);
  if (present(doc, "pretraining_tp")) c.integer(doc, "", "pretraining_tp", {.min = 1});  // the same maths, sliced

  // Gemma's and Qwen3's pieces.
  cfg.qk_norm = f == Family::qwen3 || f == Family::gemma3;
  if (gemma) {
    cfg.norm_weight_offset = 1.0;
    cfg.scale_embeddings = true;
    cfg.sandwich_norms = true;
    cfg.query_pre_attn_scalar =
        c.number(doc, "", "query_pre_attn_scalar", {.min = 0, .max = 1e9, .exclusive_min = true}, 256).value_or(256);
    auto softcap = [&](const char* key, double dflt) {
      if (doc.contains(key) && doc[key].is_null()) return 0.0;
      return c.number(doc, "", key, {.min = 0, .max = 1e9, .exclusive_min = true}, dflt).value_or(0.0);
    };
    cfg.attn_logit_softcapping = softcap("attn_logit_softcapping", fam->attn_softcap);
    cfg.final_logit_softcapping = softcap("final_logit_softcapping", fam->final_softcap);
    if (f == Family::gemma3 && cfg.attn_logit_softcapping > 0)
      c.fail("attn_logit_softcapping", "transformers' Gemma 3 does not apply it: only null is supported");
    if (f == Family::gemma3 && present(doc, "use_bidirectional_attention") &&
        c.boolean(doc, "", "use_bidirectional_attention").value_or(false))
      c.fail("use_bidirectional_attention", "braid's decoders are causal: only false is supported");
    if (present(doc, "sliding_window_size")) c.integer(doc, "", "sliding_window_size", {.min = 1});  // Gemma 2's old alias
    if (present(doc, "cache_implementation")) c.string(doc, "", "cache_implementation");
  }

  // Sliding windows.
  int window = 0;
  if (f != Family::llama) {
    bool use = true;
    if (f == Family::qwen2 || f == Family::qwen3) use = c.boolean(doc, "", "use_sliding_window", false).value_or(false);
    const bool given_null = doc.contains("sliding_window") && doc["sliding_window"].is_null();
    if (use && !given_null)
      window = int(c.integer(doc, "", "sliding_window", {.min = 1, .max = kMaxPositions}, fam->sliding_window)
                       .value_or(0));
    else if (present(doc, "sliding_window"))
      c.integer(doc, "", "sliding_window", {.min = 1, .max = kMaxPositions});
  }
  const int max_window_layers =
      int(c.integer(doc, "", "max_window_layers", {.min = 0, .max = kMaxLayers}, 28).value_or(28));
  // gemma3's pattern, under its later private name too (beside layer_types, which then rules).
  const char* pattern_key = present(doc, "sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
  const int pattern = int(c.integer(doc, "", pattern_key, {.min = 1, .max = kMaxLayers}, 6).value_or(6));
  cfg.sliding_layers = sliding_layers_of(doc, c, f, cfg.num_hidden_layers, window, max_window_layers, pattern);
  if (std::find(cfg.sliding_layers.begin(), cfg.sliding_layers.end(), 1) != cfg.sliding_layers.end()) {
    cfg.sliding_window = window;
  } else {
    cfg.sliding_layers.clear();
  }

  // RoPE: rope_theta and rope_scaling (and gemma3's rope_local_base_freq), or rope_parameters.
  Rope global{fam->rope_theta, {}}, local{10000.0, {}};
  bool has_local = f == Family::gemma3;
  if (present(doc, "rope_parameters")) {
    if (present(doc, "rope_scaling")) c.fail("rope_scaling", "give rope_scaling or rope_parameters, not both");
    parse_rope_parameters(doc, c, cfg.max_position_embeddings, fam->rope_theta, global, local, has_local);
    if (present(doc, "rope_theta") && c.number(doc, "", "rope_theta").value_or(0) != global.theta)
      c.fail("rope_theta", "differs from rope_parameters' rope_theta");
  } else {
    global.theta =
        c.number(doc, "", "rope_theta", {.min = 0, .max = 1e12, .exclusive_min = true}, fam->rope_theta).value_or(1e4);
    global.scaling = parse_rope_scaling(doc, c, "", cfg.max_position_embeddings);
    if (f == Family::gemma3) {
      local.theta = c.number(doc, "", "rope_local_base_freq", {.min = 0, .max = 1e12, .exclusive_min = true}, 10000.0)
                        .value_or(1e4);
    }
  }
  cfg.rope_theta = global.theta;
  cfg.rope_scaling = global.scaling;
  if (has_local) {
    if (local.scaling.type != RopeScaling::Type::none)
      c.fail("rope_parameters.sliding_attention", "braid rotates sliding layers without rope scaling (rope_type default)");
    cfg.rope_local_theta = local.theta;
  }
  c.check();
  return cfg;
}

ModelConfig load_config(const std::string& path) { return parse_config(load_json_file(path), path); }

json config_to_json(const ModelConfig& cfg) {
  const FamilyInfo& fam = info_of(cfg.family);
  json j{
      {"architectures", {std::string(fam.prefix) + "ForCausalLM"}},
      {"model_type", fam.model_type},
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
      {"rope_scaling", rope_scaling_to_json(cfg.rope_scaling)},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"},
  };
  const bool gemma = cfg.family == Family::gemma2 || cfg.family == Family::gemma3;
  if (gemma) {
    j["hidden_activation"] = "gelu_pytorch_tanh";
  } else {
    j["hidden_act"] = "silu";
  }
  if (cfg.head_dim_override > 0 || fam.head_dim > 0) j["head_dim"] = cfg.head_dim();
  if (cfg.family == Family::llama || cfg.family == Family::qwen3 || gemma) j["attention_bias"] = cfg.o_bias;
  if (cfg.family == Family::llama) j["mlp_bias"] = cfg.mlp_bias;
  auto layer_types = [&] {
    json lt = json::array();
    for (int l = 0; l < cfg.num_hidden_layers; ++l) lt.push_back(cfg.is_sliding(l) ? "sliding_attention" : "full_attention");
    return lt;
  };
  const bool any_sliding = cfg.sliding_window > 0;
  switch (cfg.family) {
    case Family::llama: break;
    case Family::mistral: j["sliding_window"] = any_sliding ? json(cfg.sliding_window) : json(nullptr); break;
    case Family::qwen2:
    case Family::qwen3: {
      // The legacy keys where the sliding layers are a suffix [m, L); layer_types always.
      int first = cfg.num_hidden_layers;
      for (int l = cfg.num_hidden_layers - 1; l >= 0 && cfg.is_sliding(l); --l) first = l;
      j["use_sliding_window"] = any_sliding;
      j["sliding_window"] = any_sliding ? json(cfg.sliding_window) : json(nullptr);
      j["max_window_layers"] = any_sliding ? first : cfg.num_hidden_layers;
      j["layer_types"] = layer_types();
      break;
    }
    case Family::gemma2:
    case Family::gemma3:
      j["query_pre_attn_scalar"] = cfg.query_pre_attn_scalar;
      j["attn_logit_softcapping"] = cfg.attn_logit_softcapping > 0 ? json(cfg.attn_logit_softcapping) : json(nullptr);
      j["final_logit_softcapping"] = cfg.final_logit_softcapping > 0 ? json(cfg.final_logit_softcapping) : json(nullptr);
      j["sliding_window"] = any_sliding ? json(cfg.sliding_window) : json(nullptr);
      j["layer_types"] = layer_types();
      if (cfg.family == Family::gemma3) {
        j["rope_local_base_freq"] = cfg.rope_local_theta;
        // The pattern older transformers derive the layer types from, where one gives them.
        for (int p = 1; p <= cfg.num_hidden_layers + 1; ++p) {
          bool same = true;
          for (int l = 0; l < cfg.num_hidden_layers; ++l) same = same && cfg.is_sliding(l) == ((l + 1) % p != 0);
          if (same) {
            j["sliding_window_pattern"] = p;
            break;
          }
        }
      }
      break;
  }
  return j;
}

}  // namespace braid::model
