// Cutting a batch of samples into the micro-batches one forward/backward holds.
//
// A trainer shuffles sequence indices, takes a mini-batch of them (one optimizer
// step) and splits that into micro-batches whose gradients accumulate. Whole
// sequences only: a micro-batch never cuts one, and `group` consecutive indices
// stay together (the chosen/rejected pair of a reward-model batch).
#pragma once

#include "io/sample_batch.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::train {

// The sequences `indices` of b, in that order, with every array b has (reward and
// per-token arrays included).
io::SampleBatch select_sequences(const io::SampleBatch& b, std::span<const std::size_t> indices);

struct MicroBatchLimits {
  std::int64_t max_tokens = 4096;   // tokens in one micro-batch
  std::int64_t max_sequences = 0;   // sequences in one micro-batch; 0: no limit
  std::size_t group = 1;            // indices that stay together
};

// Greedy in the given order: a micro-batch is closed when the next group would pass
// a limit. UsageError when one group alone passes it (naming the sizes), or when
// indices.size() is not a multiple of group.
std::vector<io::SampleBatch> micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                           const MicroBatchLimits& limits);

// Exactly `count` micro-batches of contiguous runs of groups with token counts as even
// as the order allows (a pipeline schedule fixes the count). UsageError when there
// are fewer groups than count.
std::vector<io::SampleBatch> split_micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                                 int count, std::size_t group = 1);

}  // namespace braid::train
