// The shape of a decoder of any family braid runs (model/config.hpp), read from a Hugging
// Face config.json, and the parameter, FLOP and byte counts the cost model derives from it:
// head_dim apart from hidden / heads, biases, q/k norms, Gemma's extra norms, tied
// embeddings and sliding-window layers are counted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.hpp"
#include "model/config.hpp"

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
  // Everything else the config says (family, head_dim, biases, norms, tied embeddings,
  // sliding windows); its sizes are those above. Llama's defaults when built by hand.
  model::ModelConfig config;

  std::int64_t head_dim() const {
    return config.head_dim_override > 0 ? config.head_dim_override : heads > 0 ? hidden / heads : 0;
  }
  double kv_dim() const { return static_cast<double>(kv_heads * head_dim()); }
  double attention_dim() const { return static_cast<double>(heads * head_dim()); }
  // Parameters of the matrix products of one decoder layer (q, k, v, o, gate, up, down).
  double layer_matmul_params() const;
  // ... plus its norms (2, Gemma 4, and q/k norms) and biases.
  double layer_params() const;
  // Parameters of one layer's LoRA adapters of this rank on all seven products (A [r × in]
  // and B [out × r] each).
  double layer_lora_params(int rank) const;
  double embedding_params() const { return static_cast<double>(vocab) * hidden; }
  // The final norm and the head: an untied LM head's matrix, a value head's row (and bias);
  // a tied LM head reads the embedding (one matrix where one stage holds both).
  double head_params() const;
  double total_params() const { return layers * layer_params() + embedding_params() + head_params(); }
  // Keys a token attends to in a layer, averaged over the layers, in a sequence of seq_len
  // tokens (causal: seq_len / 2; a sliding layer at most its window), and a decode step's
  // keys at a context of kv_len.
  double attended_keys(double seq_len) const;
  double decode_keys(double kv_len) const;

  // Same architecture (the head kind included): one profile entry serves both.
  bool same_as(const ModelShape& o) const;
  std::string key() const;  // "h8192-i22016-l80-a64-kv64-v32000[-value]", then the family's pieces
};

// Reads a config.json's keys (model/config.hpp: every family, its keys checked as braid-train
// checks them, problems into c) and profile.json's "value_head". `where` is the path of the
// object in its file.
ModelShape shape_from_hf_config(const json& cfg, Checker& c, std::string_view where);
// The shape's config.json keys (and "value_head"): the six sizes for a Llama, the whole config
// otherwise, so that shape_from_hf_config reads the same shape back.
ordered_json shape_to_hf_json(const ModelShape& s);

}  // namespace braid::plan
