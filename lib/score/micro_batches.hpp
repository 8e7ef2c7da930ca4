// Packing a batch's sequences into micro-batches of at most `micro_tokens` tokens, so
// that a model pass over a shard of any size runs in activations of a fixed size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace braid::score {

struct MicroBatch {
  std::vector<std::size_t> sequences;  // indices into the batch, in order
  std::int64_t tokens = 0;
};

// Consecutive sequences, greedily, up to micro_tokens tokens each; a sequence longer
// than micro_tokens gets a micro-batch of its own. Empty sequences are left out
// (a model has nothing to say about them). micro_tokens must be positive.
std::vector<MicroBatch> pack_micro_batches(std::span<const std::int64_t> offsets, std::int64_t micro_tokens);

}  // namespace braid::score
