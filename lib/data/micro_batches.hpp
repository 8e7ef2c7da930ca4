// Packing a batch's sequences into micro-batches, the pieces one model pass holds, so
// that a pass over a batch of any size runs in activations of a fixed size. Whole
// sequences only: a micro-batch never cuts one, and `group` consecutive indices stay
// together (the chosen/rejected pair of a reward-model batch).
//
// One greedy packer serves scoring (braid-score's passes, over every sequence in file
// order) and training (a trainer's shuffled mini-batch, whose micro-batches' gradients
// accumulate); a pipeline schedule, which fixes the count, splits evenly instead.
#pragma once

#include "core/runs.hpp"   // greedy_runs, the packer itself
#include "io/sample_batch.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace braid::data {

// A scoring pass's micro-batch: sequence indices into the batch, in order, and their tokens.
struct MicroBatch {
  std::vector<std::size_t> sequences;
  std::int64_t tokens = 0;
};

// Every non-empty sequence of a batch with these offsets (a model has nothing to say
// about an empty one), in order, greedily up to micro_tokens tokens a micro-batch; a
// sequence longer than micro_tokens gets a micro-batch of its own. micro_tokens must be
// positive (std::invalid_argument).
std::vector<MicroBatch> pack_micro_batches(std::span<const std::int64_t> offsets, std::int64_t micro_tokens);

// The sequences `indices` of b, in that order, with every array b has (reward and
// per-token arrays included).
io::SampleBatch select_sequences(const io::SampleBatch& b, std::span<const std::size_t> indices);

struct MicroBatchLimits {
  std::int64_t max_tokens = 4096;   // tokens in one micro-batch
  std::int64_t max_sequences = 0;   // sequences in one micro-batch; 0: no limit
  std::size_t group = 1;            // indices that stay together
};

// The sequences `indices` of b as micro-batches, greedily in the given order
// (greedy_runs over the groups). UsageError when one group alone passes a limit (naming
// the sizes), or when indices.size() is not a multiple of group.
std::vector<io::SampleBatch> micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                           const MicroBatchLimits& limits);

// Exactly `count` micro-batches of contiguous runs of groups with token counts as even
// as the order allows (a pipeline schedule fixes the count). UsageError when there
// are fewer groups than count.
std::vector<io::SampleBatch> split_micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                                 int count, std::size_t group = 1);

}  // namespace braid::data
