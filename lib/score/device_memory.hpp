// braid-score's device memory, predicted before any model is loaded (memory/prediction.hpp):
// the reference, critic and reward models it opens and their passes' buffers, against the
// device's free memory.
#pragma once

#include "backend/backend.hpp"
#include "memory/prediction.hpp"
#include "score/command.hpp"

#include <optional>
#include <string>
#include <vector>

namespace braid::score {

// The largest micro-batch the passes will hold (pack_micro_batches at micro_tokens) over the
// named shards, from their headers: per shard, min(its tokens, max(micro_tokens, its longest
// sequence)) tokens (a longer sequence is a micro-batch of its own) and min(its sequences,
// micro_tokens) sequences. Shards to come (paths on stdin, "-"; none named: a fused rollout
// feeds them) are unknown: micro_tokens of both then (a sequence longer than micro_tokens
// would take more).
memory::MicroBatchShape largest_micro_batch(const std::vector<std::string>& inputs, std::int64_t micro_tokens);

// The models the run opens (settings_from(o) decides which) and their passes over micro-batches of `largest`.
memory::Prediction scoring_memory(const backend::Backend& be, const CommandOptions& o, const ScoreSettings& s,
                                  memory::MicroBatchShape largest);

// The check braid-score makes after choosing its device and before loading: nothing (and no
// file opened) on the CPU; on a GPU, InputError (exit 2) naming each part, the free memory and
// what to change when the prediction exceeds the free memory. Returns the prediction checked.
std::optional<memory::Prediction> require_device_memory(const backend::Backend& be, const CommandOptions& o,
                                                        const ScoreSettings& s);

}  // namespace braid::score
