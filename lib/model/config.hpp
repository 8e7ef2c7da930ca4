// A Llama model's shape, read from the keys of a Hugging Face config.json.
//
//   hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads
//   (default: num_attention_heads), intermediate_size, vocab_size, rms_norm_eps,
//   rope_theta, max_position_embeddings, tie_word_embeddings.
//
// Other keys of a real config.json (architectures, torch_dtype, bos_token_id, ...)
// are ignored, except those that would change the maths and that braid does not
// implement (hidden_act other than silu, attention/mlp bias, rope_scaling, a
// head_dim other than hidden_size / num_attention_heads): those are errors.
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <string>

namespace braid::model {

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

  int head_dim() const { return hidden_size / num_attention_heads; }
  // Rows of the fused q|k|v projection: (heads + 2 kv heads) · head_dim.
  int qkv_dim() const { return (num_attention_heads + 2 * num_key_value_heads) * head_dim(); }
};

// Reads and validates; every problem is reported at once (InputError naming `origin`).
ModelConfig parse_config(const json& doc, const std::string& origin);
ModelConfig load_config(const std::string& path);
// The config as Hugging Face writes it (model_type "llama", LlamaForCausalLM), so that
// a config.json written from it loads in transformers.
json config_to_json(const ModelConfig& cfg);

}  // namespace braid::model
