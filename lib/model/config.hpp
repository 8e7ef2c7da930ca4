// A Llama model's shape, read from the keys of a Hugging Face config.json.
//
//   hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads
//   (default: num_attention_heads), intermediate_size, vocab_size, rms_norm_eps,
//   rope_theta, max_position_embeddings, tie_word_embeddings, rope_scaling (null, or
//   {"rope_type": "linear", "factor"} or {"rope_type": "llama3", "factor",
//   "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, as
//   Llama 3.1/3.2 ship; "type" is read as rope_type's older name).
//
// Other keys of a real config.json (architectures, torch_dtype, bos_token_id, ...)
// are ignored, except those that would change the maths and that braid does not
// implement (hidden_act other than silu, attention/mlp bias, another rope_scaling
// type, a head_dim other than hidden_size / num_attention_heads): those are errors.
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::model {

// How RoPE's frequencies are stretched for contexts past the pretraining length
// (transformers' ROPE_INIT_FUNCTIONS): none; linear (every inverse frequency / factor);
// llama3 (low frequencies / factor, high ones kept, a smooth blend between).
struct RopeScaling {
  enum class Type { none, linear, llama3 };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int original_max_position_embeddings = 8192;   // llama3
};

struct ModelConfig {
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  RopeScaling rope_scaling;

  int head_dim() const { return hidden_size / num_attention_heads; }
  // Rows of the fused q|k|v projection: (heads + 2 kv heads) · head_dim.
  int qkv_dim() const { return (num_attention_heads + 2 * num_key_value_heads) * head_dim(); }
};

// RoPE's inverse frequencies, head_dim / 2 of them: θ^(−2j/d), then rope_scaling's
// adjustment, as transformers' _compute_default_rope_parameters and
// _compute_linear_scaling / _compute_llama3_parameters compute them (in double here).
std::vector<double> rope_inv_freq(const ModelConfig& cfg);

// The "rope_scaling" value of a config (null or absent: none), its problems into c;
// `where` is the path of the object holding it. braid-profile checks with it too.
RopeScaling parse_rope_scaling(const json& doc, Checker& c, std::string_view where = "");
json rope_scaling_to_json(const RopeScaling& r);

// Reads and validates; every problem is reported at once (InputError naming `origin`).
ModelConfig parse_config(const json& doc, const std::string& origin);
ModelConfig load_config(const std::string& path);
// The config as Hugging Face writes it (model_type "llama", LlamaForCausalLM), so that
// a config.json written from it loads in transformers.
json config_to_json(const ModelConfig& cfg);

}  // namespace braid::model
