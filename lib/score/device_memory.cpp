#include "score/device_memory.hpp"

#include "core/files.hpp"
#include "io/sample_shard.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace braid::score {

memory::MicroBatchShape largest_micro_batch(const std::vector<std::string>& inputs, std::int64_t micro_tokens) {
  if (inputs.empty() || (inputs.size() == 1 && is_std_stream(inputs.front()))) return {micro_tokens, micro_tokens};
  memory::MicroBatchShape largest{1, 1};
  for (const std::string& in : inputs) {
    const io::SampleShardInfo info = io::probe_sample_shard(in);
    largest.tokens = std::max(largest.tokens, std::min(info.tokens, std::max(micro_tokens, info.longest)));
    largest.sequences = std::max(largest.sequences, std::min(info.sequences, micro_tokens));
  }
  return largest;
}

memory::Prediction scoring_memory(const backend::Backend& be, const CommandOptions& o, const ScoreSettings& s,
                                  memory::MicroBatchShape largest) {
  // As ScoreSession opens them, each with its pass (score/model_passes.hpp): the reference's
  // LM-head chunk with its targets and logprobs; a value head's values.
  std::vector<memory::ScoredModel> models;
  if (!o.ref.empty()) {
    const memory::ModelSpec ref = memory::peek_checkpoint(o.ref, "reference", o.dtype);
    models.push_back({.model = ref, .lm_head_chunk_rows = memory::lm_head_chunk_rows(be, ref.config), .output_rows = 2});
  }
  if (s.uses_critic()) {
    models.push_back({.model = memory::peek_checkpoint(o.critic, "critic", o.dtype), .output_rows = 1});
  }
  if (!o.reward.empty()) {
    models.push_back({.model = memory::peek_checkpoint(o.reward, "reward model", o.dtype), .output_rows = 1});
  }
  return memory::predict_scoring(models, largest);
}

std::optional<memory::Prediction> require_device_memory(const backend::Backend& be, const CommandOptions& o,
                                                        const ScoreSettings& s) {
  if (!be.device_memory()) return std::nullopt;
  const memory::MicroBatchShape largest = largest_micro_batch(o.inputs, s.micro_tokens);
  memory::Prediction p = scoring_memory(be, o, s, largest);
  std::string advice = fmt::format("Lower --micro-tokens (now {}; the largest micro-batch holds {} tokens)",
                                   s.micro_tokens, largest.tokens);
  if (o.dtype != backend::DType::bf16) advice += ", or store the weights in bf16 (--dtype bf16)";
  memory::require_fits(p, be, o.device, advice);
  return p;
}

}  // namespace braid::score
