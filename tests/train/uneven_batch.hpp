// The tiny model and the batch of uneven sequences that the micro-batch invariance and the
// data-parallel tests both cut in different ways.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "io/sample_batch.hpp"
#include "model/config.hpp"
#include "tests/common/tiny_models.hpp"

namespace braid::test {

inline model::ModelConfig tiny() {
  return test::tiny_config({.positions = 40});
}

// 14 sequences of 5 to 30 tokens with prompts of 2 to 6 and every per-token array: lengths far
// apart, so that a per-micro-batch (or per-rank) mean would weigh tokens unequally.
inline io::SampleBatch uneven_batch(std::uint64_t seed) {
  Rng rng(seed);
  io::SampleBatch b;
  for (std::size_t i = 0; i < 14; ++i) {
    const std::size_t len = 5 + rng.below(26);
    std::vector<std::int32_t> seq(len);
    for (auto& t : seq) t = static_cast<std::int32_t>(rng.below(24));
    b.add(seq, static_cast<std::int32_t>(2 + rng.below(5)), static_cast<std::int64_t>(i));
  }
  auto arr = [&](double mean, double sd) {
    std::vector<float> v(b.token_count());
    for (auto& x : v) x = static_cast<float>(mean + sd * rng.normal());
    return v;
  };
  b.logprobs_actor = arr(-3.2, 0.3);
  b.logprobs_ref = arr(-3.2, 0.3);
  b.advantages = arr(0.0, 1.0);
  b.values = arr(0.0, 0.5);
  b.returns = arr(0.3, 0.5);
  return b;
}

}  // namespace braid::test
