// A decoder's shape and maths, read from the keys of a Hugging Face config.json, named as
// transformers names them. Six families (model_type): llama, mistral, qwen2, qwen3, gemma2,
// gemma3_text (docs/models.md has the table of what each takes).
//
//   every family   hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
//                  intermediate_size, vocab_size, rms_norm_eps, max_position_embeddings,
//                  tie_word_embeddings, head_dim (independent of hidden/heads), rope_theta and
//                  rope_scaling (linear, dynamic, yarn, llama3), or transformers 5's
//                  rope_parameters; layer_types where the family has it
//   llama          attention_bias (q, k, v, o), mlp_bias (gate, up, down), pretraining_tp
//   mistral        sliding_window (every layer)
//   qwen2          q, k, v biases; use_sliding_window, sliding_window, max_window_layers
//   qwen3          per-head q/k RMSNorm; attention_bias; the sliding-window keys of qwen2
//   gemma2/3       GeGLU (gelu_pytorch_tanh), (1 + w) RMSNorm, embeddings · √hidden_size,
//                  norms after attention and around the MLP, query_pre_attn_scalar,
//                  final_logit_softcapping, sliding_window on alternating layers (gemma2:
//                  even layers; gemma3: sliding_window_pattern); gemma2 attn_logit_softcapping;
//                  gemma3 q/k RMSNorm and rope_local_base_freq for its sliding layers
//
// Keys every config may carry without changing the maths (architectures, torch_dtype, token
// ids, label maps, ...) are read or passed over; any other key is refused, naming it, as is a
// value braid does not implement (another hidden_act, attention dropout, ...): a model braid
// cannot reproduce exactly is never run approximately.
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid::model {

enum class Family { llama, mistral, qwen2, qwen3, gemma2, gemma3 };

// config.json's model_type ("gemma3_text" for gemma3) and the prefix of transformers' classes
// ("Qwen2" of Qwen2ForCausalLM).
std::string_view model_type_of(Family f);
std::string_view class_prefix_of(Family f);

// The MLP's gate activation: SwiGLU's silu (Llama, Mistral, Qwen) or GeGLU's tanh-approximated
// GELU (Gemma's gelu_pytorch_tanh).
enum class Activation { silu, gelu_tanh };

// How RoPE's frequencies are stretched for contexts past the pretraining length
// (transformers' ROPE_INIT_FUNCTIONS): none; linear (every inverse frequency / factor);
// dynamic (NTK: the base grows with a sequence longer than max_position_embeddings; braid
// runs sequences up to max_position_embeddings, where it is the unscaled RoPE, as in
// transformers); yarn (a ramp between interpolated and kept frequencies, cos and sin times
// an attention factor); llama3 (low frequencies / factor, high ones kept, a smooth blend).
struct RopeScaling {
  enum class Type { none, linear, dynamic, yarn, llama3 };
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int original_max_position_embeddings = 8192;   // llama3, yarn (yarn's default: max_position_embeddings)
  double attention_factor = 0;                   // yarn: 0 = from factor, mscale and mscale_all_dim
  double beta_fast = 32, beta_slow = 1;          // yarn
  double mscale = 0, mscale_all_dim = 0;         // yarn (0: not given)
  bool truncate = true;                          // yarn: the ramp's ends rounded to whole dimensions
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

  // ---- what families beyond Llama add; each is off (Llama's maths) by default ----
  Family family = Family::llama;
  int head_dim_override = 0;            // "head_dim"; 0: hidden_size / num_attention_heads
  bool qkv_bias = false;                // q_proj, k_proj, v_proj biases (qwen2; attention_bias)
  bool o_bias = false;                  // o_proj bias (attention_bias)
  bool mlp_bias = false;                // gate_proj, up_proj, down_proj biases (llama's mlp_bias)
  bool qk_norm = false;                 // q_norm, k_norm: RMSNorm of each head before RoPE (qwen3, gemma3)
  Activation hidden_act = Activation::silu;
  double norm_weight_offset = 0;        // gemma: every RMSNorm gain acts as 1 + weight
  bool scale_embeddings = false;        // gemma: embeddings times √hidden_size (in f32)
  // gemma2/3: post_attention_layernorm normalises attention's output before the residual
  // add, pre_feedforward_layernorm is the MLP's input norm, post_feedforward_layernorm its
  // output's. (Without: post_attention_layernorm is the MLP's input norm, as in Llama.)
  bool sandwich_norms = false;
  double attn_logit_softcapping = 0;    // 0: off; attention scores s -> c·tanh(s / c)
  double final_logit_softcapping = 0;   // 0: off; logits z -> c·tanh(z / c)
  double query_pre_attn_scalar = 0;     // 0: head_dim; scores are q·k times its −½ power
  int sliding_window = 0;               // keys a sliding layer sees: q_pos − k_pos < window
  std::vector<std::uint8_t> sliding_layers;   // per layer, 1: a sliding-window layer (empty: none)
  // gemma3's sliding layers rotate with a RoPE of their own: this base, no scaling
  // (rope_local_base_freq); 0: every layer uses rope_theta and rope_scaling.
  double rope_local_theta = 0;

  int head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden_size / num_attention_heads; }
  // Rows of the fused q|k|v projection: (heads + 2 kv heads) · head_dim.
  int qkv_dim() const { return (num_attention_heads + 2 * num_key_value_heads) * head_dim(); }
  // The factor of q·k in the attention scores: query_pre_attn_scalar^−½ or head_dim^−½.
  double attention_scale() const;
  // Whether layer l attends over a sliding window (0 < sliding_window).
  bool is_sliding(int layer) const;
  // Whether sliding layers have a RoPE of their own (gemma3).
  bool has_local_rope() const { return rope_local_theta > 0; }
};

// RoPE's inverse frequencies, head_dim / 2 of them: θ^(−2j/d), then rope_scaling's
// adjustment, as transformers' _compute_default_rope_parameters and
// _compute_linear_scaling / _compute_dynamic_ntk / _compute_yarn / _compute_llama3_parameters
// compute them (in double here). local = true: the sliding layers' RoPE (has_local_rope()).
std::vector<double> rope_inv_freq(const ModelConfig& cfg, bool local = false);
// What cos and sin are multiplied by (yarn's attention factor; 1 for the others).
double rope_attention_factor(const ModelConfig& cfg, bool local = false);

// The "rope_scaling" value of a config (null or absent: none), its problems into c;
// `where` is the path of the object holding it. braid-profile checks with it too.
// max_position_embeddings: yarn's default original_max_position_embeddings.
RopeScaling parse_rope_scaling(const json& doc, Checker& c, std::string_view where = "",
                               int max_position_embeddings = 2048);
json rope_scaling_to_json(const RopeScaling& r);

// Reads and validates; every problem is reported at once (InputError naming `origin`).
ModelConfig parse_config(const json& doc, const std::string& origin);
ModelConfig load_config(const std::string& path);
// The config as Hugging Face writes it for the family (model_type, <Family>ForCausalLM and
// the family's keys), so that a config.json written from it loads in transformers.
json config_to_json(const ModelConfig& cfg);

}  // namespace braid::model
