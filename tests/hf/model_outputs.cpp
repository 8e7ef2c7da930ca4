// A test helper: the outputs of a braid checkpoint on given token sequences, as a
// safetensors file the comparison scripts read (bench/gpu/hf_families.py, against
// transformers; tests/hf/cli_families.sh, across an export and import).
//
//   model_outputs CHECKPOINT TOKENS OUT.safetensors [cpu|cuda]
//
// TOKENS: sequences of comma-separated ids, separated by ';' ("5,17,3;1,0,9"). OUT holds
// "logits" [tokens × vocab] (soft-capped as the model's config says) when the checkpoint
// has an LM head, and "values" [tokens] when it has a value head.
#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "hf/safetensors.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace braid;
  if (argc < 4) {
    std::cerr << "usage: model_outputs CHECKPOINT TOKENS OUT.safetensors [cpu|cuda]\n";
    return 2;
  }
  try {
    std::vector<std::int32_t> tokens;
    std::vector<std::int64_t> offsets{0};
    std::stringstream seqs(argv[2]);
    for (std::string seq; std::getline(seqs, seq, ';');) {
      std::stringstream ids(seq);
      for (std::string id; std::getline(ids, id, ',');) tokens.push_back(std::int32_t(std::stoi(id)));
      offsets.push_back(std::int64_t(tokens.size()));
    }
    std::string problem;
    const auto spec = backend::parse_device(argc > 4 ? argv[4] : "cpu", &problem);
    if (!spec) {
      std::cerr << "model_outputs: " << problem << "\n";
      return 2;
    }
    auto be = backend::make_backend(*spec);
    auto opened = checkpoint::open_model(argv[1], *be);
    model::Model& m = *opened.model;
    const auto n = std::int64_t(tokens.size());
    auto acts = m.make_activations({.max_tokens = n, .max_sequences = std::int64_t(offsets.size()) - 1});
    m.forward({tokens, offsets}, acts);
    hf::SafetensorsWriter w(argv[3], hf::StoreDtype::f32);
    std::vector<float> logits, values;
    if (m.lm_head_weight()) {
      backend::Buffer<float> dev(*be, std::size_t(n * m.config().vocab_size));
      m.lm_logits(acts.output(), n, dev.data());
      logits.resize(dev.size());
      be->copy_to_host(logits.data(), dev.data(), logits.size() * sizeof(float));
      w.add("logits", {n, m.config().vocab_size}, logits.data());
    }
    if (m.find("score.weight")) {
      backend::Buffer<float> dev(*be, std::size_t(n));
      m.values(acts, dev.data());
      values.resize(dev.size());
      be->copy_to_host(values.data(), dev.data(), values.size() * sizeof(float));
      w.add("values", {n}, values.data());
    }
    w.commit();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "model_outputs: " << e.what() << "\n";
    return 2;
  }
}
