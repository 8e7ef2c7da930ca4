#include "plan/model_shape.hpp"

#include <fmt/format.h>

namespace braid::plan {

double ModelShape::layer_matmul_params() const {
  const double h = static_cast<double>(hidden);
  return h * (h + 2.0 * kv_dim()) + h * h + 3.0 * h * static_cast<double>(intermediate);
}

bool ModelShape::same_as(const ModelShape& o) const {
  return hidden == o.hidden && intermediate == o.intermediate && layers == o.layers && heads == o.heads &&
         kv_heads == o.kv_heads && vocab == o.vocab && value_head == o.value_head;
}

std::string ModelShape::key() const {
  return fmt::format("h{}-i{}-l{}-a{}-kv{}-v{}{}", hidden, intermediate, layers, heads, kv_heads, vocab,
                     value_head ? "-value" : "");
}

ModelShape shape_from_hf_config(const json& cfg, Checker& c, std::string_view where) {
  ModelShape s;
  // The ranges braid-train reads a config with (lib/model/config.cpp, docs/formats.md).
  s.hidden = c.integer(cfg, where, "hidden_size", {.min = 1, .max = 65536}).value_or(1);
  s.intermediate = c.integer(cfg, where, "intermediate_size", {.min = 1, .max = 1048576}).value_or(1);
  s.layers = c.integer(cfg, where, "num_hidden_layers", {.min = 1, .max = 1024}).value_or(1);
  s.heads = c.integer(cfg, where, "num_attention_heads", {.min = 1, .max = 1024}).value_or(1);
  s.kv_heads = c.integer(cfg, where, "num_key_value_heads", {.min = 1, .max = 1024}, s.heads).value_or(s.heads);
  s.vocab = c.integer(cfg, where, "vocab_size", {.min = 1, .max = 16777216}).value_or(1);
  if (s.heads > 0 && s.hidden % s.heads != 0) {
    c.fail(Checker::path(where, "hidden_size"),
           fmt::format("{} is not divisible by num_attention_heads {}", s.hidden, s.heads));
  }
  if (s.kv_heads > 0 && s.heads % s.kv_heads != 0) {
    c.fail(Checker::path(where, "num_key_value_heads"),
           fmt::format("{} does not divide num_attention_heads {}", s.kv_heads, s.heads));
  }
  return s;
}

ordered_json shape_to_hf_json(const ModelShape& s) {
  ordered_json j;
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
