// The shape of a Llama-style model, read from a Hugging Face config.json, and
// the parameter and byte counts the cost model derives from it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.hpp"

namespace braid::plan {

struct ModelShape {
  std::string name;
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t vocab = 0;
  bool value_head = false;  // critic / reward: the head outputs one scalar per token

  double kv_dim() const { return static_cast<double>(hidden) * kv_heads / heads; }
  // Parameters of the matrix products of one decoder layer (q, k, v, o, gate, up, down).
  double layer_matmul_params() const;
  double layer_params() const { return layer_matmul_params() + 2.0 * hidden; }
  double embedding_params() const { return static_cast<double>(vocab) * hidden; }
  double head_params() const { return (value_head ? 1.0 : static_cast<double>(vocab)) * hidden + hidden; }
  double total_params() const { return layers * layer_params() + embedding_params() + head_params(); }

  // Same architecture (the head kind included): one profile entry serves both.
  bool same_as(const ModelShape& o) const;
  std::string key() const;  // "h8192-i22016-l80-a64-kv64-v32000[-value]"
};

// Reads the HF keys hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: heads), vocab_size.
// Other keys are ignored: HF configs carry many.
ModelShape shape_from_hf_config(const json& cfg, Checker& c, std::string_view where);
ordered_json shape_to_hf_json(const ModelShape& s);

}  // namespace braid::plan
