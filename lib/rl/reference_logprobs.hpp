// The reference policy's per-token logprobs of a batch, computed once before training
// (DPO's π_ref) or an evaluation (a DPO policy's implied reward): a forward of a whole
// model over micro-batches, no backward.
#pragma once

#include "model/model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace braid::rl {

// Sequences back to back in `tokens`, sequence i at [offsets[i], offsets[i+1]) (a sample
// batch's b.tokens and b.offsets). Entry t = log π(token t | the tokens before it in its
// sequence), from row t − 1 through the chunked LM head; 0 at each sequence's first token.
// Parallel to tokens, the layout of a shard's /logprobs/ref. Micro-batches of whole
// sequences in order, at most max_tokens tokens each (core/runs.hpp's packer; UsageError
// when one sequence is longer). m: a whole model with an LM head (std::invalid_argument
// otherwise). Under tensor parallelism (m a tp rank's slices) every rank of the group
// calls it on the same batch and gets the whole logprobs.
std::vector<float> reference_logprobs(const model::Model& m, std::span<const std::int32_t> tokens,
                                      std::span<const std::int64_t> offsets, std::int64_t max_tokens);

}  // namespace braid::rl
