// What braid-train reads besides its JSON Lines of text (data/text_examples.hpp):
// scored sample shards (PPO, GRPO).
#pragma once

#include "io/sample_batch.hpp"
#include "model/config.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

struct TrainingShards {
  io::SampleBatch batch;            // every input's sequences, in input order; policy_step always
                                    // present (from meta.policy_step for shards without it)
  std::vector<std::filesystem::path> files;
  std::int64_t policy_step = -1;    // the inputs' meta.policy_step (the first's; a mismatch is warned)
  std::string config;               // the first input's meta.config
};

// The shards named in `args`; an argument "-" reads shard paths from stdin, one per
// line, each read the moment its line arrives. Every shard must hold the per-token
// arrays in `required` ("advantages", "logprobs/actor", ...): InputError naming the
// file and the dataset otherwise. Arrays not required are kept when every shard has
// them. on_read (if set) after each shard, with the batch so far and the index of the
// shard's first sequence in it (a caller checks the new sequences against its model).
using OnShardRead = std::function<void(const std::filesystem::path&, const io::SampleBatch&, std::size_t first)>;
TrainingShards read_training_shards(const std::vector<std::string>& args, std::span<const std::string> required,
                                    const OnShardRead& on_read = {});

// InputError naming `file` unless the sequences [from, b.size()) of b fit a model of this
// config: tokens inside its vocabulary, lengths within its positions. `role` says which
// model is too small ("actor", "critic").
void check_sequences_fit(const io::SampleBatch& b, std::size_t from, const model::ModelConfig& cfg,
                         const std::string& file, const std::string& role = "model");

}  // namespace braid::train
