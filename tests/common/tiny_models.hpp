// The tiny models of the tests: a ModelConfig from the few sizes tests vary, everything
// else ModelConfig's defaults (a Llama). Fast to build, run and train on a CPU.
//   tiny_config({.hidden = 64, .intermediate = 96, .vocab = 259, .positions = 256})
#pragma once

#include "model/config.hpp"

namespace braid::test {

struct TinyShape {
  int hidden = 32, layers = 2, heads = 4, kv_heads = 2, intermediate = 64, vocab = 24;
  int positions = 32;  // max_position_embeddings
  bool tied = false;   // tie_word_embeddings
  double rms_norm_eps = model::ModelConfig{}.rms_norm_eps, rope_theta = model::ModelConfig{}.rope_theta;
};

inline model::ModelConfig tiny_config(const TinyShape& s = {}) {
  return {.hidden_size = s.hidden, .num_hidden_layers = s.layers, .num_attention_heads = s.heads,
          .num_key_value_heads = s.kv_heads, .intermediate_size = s.intermediate, .vocab_size = s.vocab,
          .rms_norm_eps = s.rms_norm_eps, .rope_theta = s.rope_theta, .max_position_embeddings = s.positions,
          .tie_word_embeddings = s.tied};
}

// The byte tokenizer's vocabulary (256 bytes and 3 specials): models that read text.
inline constexpr int kByteVocab = 259;

// A model of byte-tokenized text, large enough to generate 200 tokens: braid-generate's
// actor in the stage tests.
inline model::ModelConfig tiny_text_config() {
  return tiny_config({.hidden = 64, .intermediate = 96, .vocab = kByteVocab, .positions = 256});
}

}  // namespace braid::test
