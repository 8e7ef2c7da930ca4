// The model shapes the engine benchmarks measure; torch_bench.py uses the same numbers.
#pragma once

#include "model/config.hpp"

#include <stdexcept>
#include <string>

namespace braid::bench {

inline model::ModelConfig bench_config(const std::string& name) {
  model::ModelConfig c;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 1024;
  if (name == "tiny") {  // ~1.2M parameters
    c.hidden_size = 128; c.num_hidden_layers = 4; c.num_attention_heads = 4; c.num_key_value_heads = 2;
    c.intermediate_size = 384; c.vocab_size = 1024;
  } else if (name == "100m") {  // ~125M parameters (GPT-2-small-like widths, Llama blocks, GQA 12/4)
    c.hidden_size = 768; c.num_hidden_layers = 12; c.num_attention_heads = 12; c.num_key_value_heads = 4;
    c.intermediate_size = 2048; c.vocab_size = 32000;
  } else if (name == "1b") {  // ~1.10B parameters: TinyLlama-1.1B's shape (GQA 32/4, head_dim 64), length 2048
    c.hidden_size = 2048; c.num_hidden_layers = 22; c.num_attention_heads = 32; c.num_key_value_heads = 4;
    c.intermediate_size = 5632; c.vocab_size = 32000; c.max_position_embeddings = 2048;
  } else {
    throw std::invalid_argument("unknown bench config " + name + " (tiny, 100m, 1b)");
  }
  return c;
}

}  // namespace braid::bench
