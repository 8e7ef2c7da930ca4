// Tiny configs of each model family with its quirks switched on, as config.json text would
// give them: biases, q/k norms, head_dim apart from hidden / heads, each rope scaling type,
// sliding windows shorter than the tests' sequences, Gemma's soft-caps small enough to bite.
// Shared by the model, tensor-parallel and memory tests.
#pragma once

#include "core/json.hpp"
#include "model/config.hpp"

#include <string>
#include <vector>

namespace braid::test {

struct FamilySizes {
  int hidden = 16, heads = 4, kv_heads = 2, head_dim = 6, inter = 20, vocab = 23, layers = 3, max_positions = 32;
};

struct FamilyConfig {
  std::string name;
  json config;
  model::ModelConfig parsed() const { return model::parse_config(config, name); }
};

inline std::vector<FamilyConfig> family_configs(const FamilySizes& z = {}) {
  const json shape{{"hidden_size", z.hidden},
                   {"num_attention_heads", z.heads},
                   {"num_key_value_heads", z.kv_heads},
                   {"head_dim", z.head_dim},
                   {"intermediate_size", z.inter},
                   {"vocab_size", z.vocab},
                   {"num_hidden_layers", z.layers},
                   {"max_position_embeddings", z.max_positions},
                   {"rms_norm_eps", 1e-5}};
  auto with = [&](json extra) {
    json c = shape;
    c.update(extra);
    return c;
  };
  return {
      {"llama (biases, yarn)",
       with({{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"attention_bias", true},
             {"mlp_bias", true}, {"rope_theta", 500.0},
             {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8}}}})},
      {"mistral (sliding window, dynamic)",
       with({{"model_type", "mistral"}, {"sliding_window", 3}, {"rope_theta", 100.0},
             {"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}})},
      {"qwen2 (q/k/v biases, tied, window on later layers, linear)",
       with({{"model_type", "qwen2"}, {"tie_word_embeddings", true}, {"use_sliding_window", true},
             {"sliding_window", 4}, {"max_window_layers", 1}, {"rope_theta", 1000.0},
             {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}})},
      {"qwen3 (q/k norms, llama3)",
       with({{"model_type", "qwen3"}, {"attention_bias", false}, {"rope_theta", 1000.0},
             {"rope_scaling",
              {{"rope_type", "llama3"}, {"factor", 2.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
               {"original_max_position_embeddings", 8}}}})},
      {"gemma2 (soft-caps, alternating window, biases)",
       with({{"model_type", "gemma2"}, {"hidden_activation", "gelu_pytorch_tanh"}, {"attention_bias", true},
             {"query_pre_attn_scalar", 5}, {"attn_logit_softcapping", 1.5}, {"final_logit_softcapping", 2.0},
             {"sliding_window", 3}, {"rope_theta", 100.0}})},
      {"gemma3_text (q/k norms, local rope, pattern 2)",
       with({{"model_type", "gemma3_text"}, {"hidden_activation", "gelu_pytorch_tanh"}, {"query_pre_attn_scalar", 8},
             {"final_logit_softcapping", 3.0}, {"sliding_window", 3}, {"sliding_window_pattern", 2},
             {"rope_theta", 1000.0}, {"rope_local_base_freq", 50.0},
             {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}})},
  };
}

}  // namespace braid::test
