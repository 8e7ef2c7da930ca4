// The reference policy's per-token logprobs of a batch, computed once before training
// (DPO's π_ref): a forward of a whole model over micro-batches, no backward.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <vector>

namespace braid::train {

// Entry t = log π(token t | the tokens before it in its sequence), from row t − 1 through
// the chunked LM head; 0 at each sequence's first token. Parallel to b.tokens, the layout
// of a shard's /logprobs/ref. Micro-batches of whole sequences, at most max_tokens tokens
// each (UsageError when one sequence is longer). m: a whole model with an LM head
// (std::invalid_argument otherwise). Under tensor parallelism (m a tp rank's slices) every
// rank of the group calls it on the same batch and gets the whole logprobs.
std::vector<float> reference_logprobs(const model::Model& m, const io::SampleBatch& b, std::int64_t max_tokens);

}  // namespace braid::train
