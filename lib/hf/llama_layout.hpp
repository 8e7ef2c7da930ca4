// The tensors (Hugging Face names and shapes) of a Llama model or a stage of one,
// without building the model: import and export stream tensors one at a time and
// never hold a whole model. Must list exactly what model::Model::tensors() holds
// (a test checks), except that a tied last stage's copy of the embedding is left out
// when `skip_tied_copy` (checkpoints store it once, with the first stage).
#pragma once

#include "model/config.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::hf {

struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
};

std::vector<TensorSpec> llama_tensors(const model::ModelConfig& cfg, const model::ModelOptions& opt,
                                      bool skip_tied_copy = true);

}  // namespace braid::hf
