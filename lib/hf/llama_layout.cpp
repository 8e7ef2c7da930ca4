#include "hf/llama_layout.hpp"

#include <fmt/format.h>

namespace braid::hf {

std::vector<TensorSpec> llama_tensors(const model::ModelConfig& c, const model::ModelOptions& o, bool skip_tied_copy) {
  const std::int64_t D = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const std::int64_t hd = c.head_dim(), H = c.num_attention_heads, KV = c.num_key_value_heads;
  const int begin = o.layers.begin;
  const int end = o.layers.end < 0 ? c.num_hidden_layers : o.layers.end;
  const bool first = begin == 0, last = end == c.num_hidden_layers;
  std::vector<TensorSpec> out;
  const bool tied_copy = !first && last && o.lm_head && c.tie_word_embeddings;
  if (first || (tied_copy && !skip_tied_copy)) out.push_back({"model.embed_tokens.weight", {V, D}});
  for (int l = begin; l < end; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    out.push_back({p + "input_layernorm.weight", {D}});
    out.push_back({p + "self_attn.q_proj.weight", {H * hd, D}});
    out.push_back({p + "self_attn.k_proj.weight", {KV * hd, D}});
    out.push_back({p + "self_attn.v_proj.weight", {KV * hd, D}});
    out.push_back({p + "self_attn.o_proj.weight", {D, H * hd}});
    out.push_back({p + "post_attention_layernorm.weight", {D}});
    out.push_back({p + "mlp.gate_proj.weight", {I, D}});
    out.push_back({p + "mlp.up_proj.weight", {I, D}});
    out.push_back({p + "mlp.down_proj.weight", {D, I}});
  }
  if (last) {
    out.push_back({"model.norm.weight", {D}});
    if (o.lm_head && !c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, D}});
    if (o.value_head) out.push_back({"score.weight", {1, D}});
  }
  return out;
}

}  // namespace braid::hf
