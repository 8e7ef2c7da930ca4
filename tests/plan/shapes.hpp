// Model shapes for the planner's tests: a Llama of the given sizes, as many key/value
// heads as query heads.
#pragma once

#include "plan/model_shape.hpp"

#include <cstdint>
#include <string>

namespace braid::test {

inline plan::ModelShape llama_shape(const std::string& name, std::int64_t hidden, std::int64_t intermediate,
                                    std::int64_t layers, std::int64_t heads, std::int64_t vocab) {
  plan::ModelShape s;
  s.name = name;
  s.hidden = hidden;
  s.intermediate = intermediate;
  s.layers = layers;
  s.heads = s.kv_heads = heads;
  s.vocab = vocab;
  return s;
}

}  // namespace braid::test
