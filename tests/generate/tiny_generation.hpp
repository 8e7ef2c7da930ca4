// What the generation tests share: a tiny model with random weights, and prompts of varied
// lengths.
#pragma once

#include "backend/backend.hpp"
#include "generate/generate.hpp"
#include "model/model.hpp"
#include "tests/common/tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace braid::test {

// A model on one CPU thread with random weights of std 0.3: larger than HF's 0.02, so that
// the random model's distributions are far from uniform and stop tokens come at varied
// steps. As a Boost.Test fixture: struct Fixture : TinyGenerator { Fixture() : ... {} }.
struct TinyGenerator {
  TinyGenerator(const model::ModelConfig& cfg, std::uint64_t seed) : m(cfg, {}, *be) { m.init_random(seed, 0.3); }
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  model::Model m;
};

// The generation tests' model, and a fixture of it with the weights of seed 17.
inline model::ModelConfig generation_config() { return tiny_config({.intermediate = 48, .positions = 64}); }

struct GenerationFixture : TinyGenerator {
  GenerationFixture() : TinyGenerator(generation_config(), 17) {}
};

// log_softmax of full-forward logits at each response token of s (and, with argmax, the
// most likely token there): the reference the generator's prefill + KV-cache decode must match.
inline std::vector<float> full_forward_logprobs(const model::Model& m, const gen::Sample& s,
                                                std::vector<std::int32_t>* argmax = nullptr) {
  std::vector<std::int32_t> tokens = s.prompt;
  tokens.insert(tokens.end(), s.response.begin(), s.response.end());
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int64_t> offsets{0, n};
  auto acts = m.make_activations({.max_tokens = n, .max_sequences = 1});
  m.forward({tokens, offsets}, acts);
  const std::int64_t V = m.config().vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(n * V));
  m.lm_logits(acts.output(), n, logits.data());
  std::vector<float> out;
  for (std::size_t i = 0; i < s.response.size(); ++i) {
    const std::size_t row = s.prompt.size() - 1 + i;
    const float* l = logits.data() + row * static_cast<std::size_t>(V);
    double mx = l[0], sum = 0;
    for (std::int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, l[v]);
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(l[v] - mx);
    out.push_back(static_cast<float>(l[s.response[i]] - mx - std::log(sum)));
    if (argmax) argmax->push_back(static_cast<std::int32_t>(std::max_element(l, l + V) - l));
  }
  return out;
}

// n prompts with sample ids first_id, first_id + 1, ...: prompt i holds (5i mod spread) + 1
// tokens, token k of it (7i + 3k) mod vocab.
inline std::vector<gen::Prompt> varied_prompts(int n, int spread, int vocab, std::uint64_t first_id) {
  std::vector<gen::Prompt> ps;
  for (int i = 0; i < n; ++i) {
    gen::Prompt p{.sample_id = first_id + static_cast<std::uint64_t>(i)};
    for (int k = 0; k <= (i * 5) % spread; ++k) p.tokens.push_back((i * 7 + k * 3) % vocab);
    ps.push_back(p);
  }
  return ps;
}

}  // namespace braid::test
