#include "plan/model_shape.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace braid::plan {
namespace {

// The config with the shape's sizes (the fields may have been set apart from it).
model::ModelConfig sized(const ModelShape& s) {
  model::ModelConfig c = s.config;
  c.hidden_size = int(s.hidden);
  c.intermediate_size = int(s.intermediate);
  c.num_hidden_layers = int(s.layers);
  c.num_attention_heads = int(s.heads);
  c.num_key_value_heads = int(s.kv_heads);
  c.vocab_size = int(s.vocab);
  return c;
}

std::int64_t sliding_count(const model::ModelConfig& c) {
  return c.sliding_window > 0 ? std::count(c.sliding_layers.begin(), c.sliding_layers.end(), 1) : 0;
}

// What sets the shape apart from a plain Llama of its sizes, for key() and same_as: ""
// for a Llama.
std::string pieces(const ModelShape& s) {
  const model::ModelConfig& c = s.config;
  std::string out;
  if (c.family != model::Family::llama) out += fmt::format("-{}", model::model_type_of(c.family));
  if (c.head_dim_override > 0) out += fmt::format("-hd{}", c.head_dim_override);
  if (c.qkv_bias) out += "-qkvb";
  if (c.o_bias) out += "-ob";
  if (c.mlp_bias) out += "-mlpb";
  if (c.tie_word_embeddings) out += "-tied";
  if (c.sliding_window > 0) out += fmt::format("-sw{}x{}", c.sliding_window, sliding_count(c));
  return out;
}

}  // namespace

double ModelShape::layer_matmul_params() const {
  const double h = static_cast<double>(hidden);
  return h * (attention_dim() + 2.0 * kv_dim()) + attention_dim() * h + 3.0 * h * static_cast<double>(intermediate);
}

double ModelShape::layer_lora_params(int rank) const {
  const double h = static_cast<double>(hidden), i = static_cast<double>(intermediate);
  // q, k, v, o, gate, up, down: in + out each.
  return rank * ((h + attention_dim()) + 2.0 * (h + kv_dim()) + (attention_dim() + h) + 2.0 * (h + i) + (i + h));
}

double ModelShape::layer_params() const {
  const double h = static_cast<double>(hidden), i = static_cast<double>(intermediate);
  double p = layer_matmul_params() + (config.sandwich_norms ? 4.0 : 2.0) * h;
  if (config.qk_norm) p += 2.0 * head_dim();
  if (config.qkv_bias) p += attention_dim() + 2.0 * kv_dim();
  if (config.o_bias) p += h;
  if (config.mlp_bias) p += 2.0 * i + h;
  return p;
}

double ModelShape::head_params() const {
  const double h = static_cast<double>(hidden);
  if (value_head) return h + h;  // final norm and score row (a bias is one more)
  return h + (config.tie_word_embeddings ? 0.0 : static_cast<double>(vocab) * h);
}

double ModelShape::attended_keys(double seq_len) const {
  const double full = seq_len / 2, sliding = sliding_count(config);
  if (sliding == 0 || layers <= 0) return full;
  const double local = std::min(full, double(config.sliding_window));
  return ((double(layers) - sliding) * full + sliding * local) / double(layers);
}

double ModelShape::decode_keys(double kv_len) const {
  const double sliding = sliding_count(config);
  if (sliding == 0 || layers <= 0) return kv_len;
  return ((double(layers) - sliding) * kv_len + sliding * std::min(kv_len, double(config.sliding_window))) /
         double(layers);
}

bool ModelShape::same_as(const ModelShape& o) const {
  // The sizes and the pieces that change a layer's cost (not eps, RoPE or the context).
  return hidden == o.hidden && intermediate == o.intermediate && layers == o.layers && heads == o.heads &&
         kv_heads == o.kv_heads && vocab == o.vocab && value_head == o.value_head && pieces(*this) == pieces(o);
}

std::string ModelShape::key() const {
  return fmt::format("h{}-i{}-l{}-a{}-kv{}-v{}{}{}", hidden, intermediate, layers, heads, kv_heads, vocab,
                     value_head ? "-value" : "", pieces(*this));
}

ModelShape shape_from_hf_config(const json& cfg, Checker& c, std::string_view where) {
  ModelShape s;
  json doc = cfg;
  if (doc.is_object()) doc.erase("value_head");  // profile.json's, not a config.json key
  try {
    s.config = model::parse_config(doc, c.file());
  } catch (const InputError& e) {
    for (const std::string& p : e.problems()) c.fail(where, p);
    if (e.problems().empty()) c.fail(where, e.what());
    return s;
  }
  s.hidden = s.config.hidden_size;
  s.intermediate = s.config.intermediate_size;
  s.layers = s.config.num_hidden_layers;
  s.heads = s.config.num_attention_heads;
  s.kv_heads = s.config.num_key_value_heads;
  s.vocab = s.config.vocab_size;
  return s;
}

ordered_json shape_to_hf_json(const ModelShape& s) {
  ordered_json j;
  if (!pieces(s).empty()) j = ordered_json::parse(model::config_to_json(sized(s)).dump());
  j["hidden_size"] = s.hidden;
  j["intermediate_size"] = s.intermediate;
  j["num_hidden_layers"] = s.layers;
  j["num_attention_heads"] = s.heads;
  j["num_key_value_heads"] = s.kv_heads;
  j["vocab_size"] = s.vocab;
  j["value_head"] = s.value_head;
  return j;
}

}  // namespace braid::plan
