#include "train/group_filter.hpp"

#include "core/error.hpp"
#include "io/sample_shard.hpp"
#include "data/micro_batches.hpp"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace braid::train {

ordered_json GroupFilterSummary::to_json() const {
  return {{"groups", groups}, {"kept", kept}, {"all_equal", all_equal}, {"beyond_max", beyond_max}};
}

void add_shard_groups(const std::filesystem::path& shard, const io::SampleBatch& batch, std::size_t first,
                      std::vector<std::int64_t>& group_of) {
  const io::SampleShardInfo info = io::probe_sample_shard(shard);
  const json cfg = json::parse(info.meta.config, nullptr, /*allow_exceptions=*/false);
  const json* gen = cfg.is_object() && cfg.contains("generate") ? &cfg["generate"] : &cfg;
  std::int64_t per = 0, first_prompt = 0;
  if (gen->is_object()) {
    if (gen->contains("samples_per_prompt") && (*gen)["samples_per_prompt"].is_number_integer()) {
      per = (*gen)["samples_per_prompt"].get<std::int64_t>();
    }
    if (gen->contains("first_prompt") && (*gen)["first_prompt"].is_number_integer()) {
      first_prompt = (*gen)["first_prompt"].get<std::int64_t>();
    }
  }
  if (per <= 0) {
    throw InputError(shard.string(), "attribute config",
                     "has no samples_per_prompt: the group filter groups samples by prompt");
  }
  for (std::size_t i = first; i < batch.size(); ++i) group_of.push_back(first_prompt + batch.sample_id[i] / per);
}

GroupFilterSummary filter_groups(io::SampleBatch& batch, std::span<const std::int64_t> group_of,
                                 const GroupFilterOptions& opt) {
  if (group_of.size() != batch.size()) {
    throw std::invalid_argument(fmt::format("filter_groups: {} groups for {} sequences", group_of.size(), batch.size()));
  }
  if (!batch.reward) throw InputError("the scored shards", "/reward", "is missing: the group filter reads each sample's reward");
  std::map<std::int64_t, std::vector<std::size_t>> members;  // in stream order
  for (std::size_t i = 0; i < batch.size(); ++i) members[group_of[i]].push_back(i);
  GroupFilterSummary s;
  s.groups = static_cast<std::int64_t>(members.size());
  std::vector<bool> keep(batch.size(), false);
  for (const auto& [group, seqs] : members) {
    const float first = (*batch.reward)[seqs.front()];
    bool equal = true;
    for (std::size_t i : seqs) equal = equal && (*batch.reward)[i] == first;
    if (opt.drop_equal && equal) {
      ++s.all_equal;
      continue;
    }
    if (opt.max_groups > 0 && s.kept >= opt.max_groups) {
      ++s.beyond_max;
      continue;
    }
    ++s.kept;
    for (std::size_t i : seqs) keep[i] = true;
  }
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (keep[i]) kept.push_back(i);
  }
  if (kept.size() != batch.size()) batch = data::select_sequences(batch, kept);
  return s;
}

}  // namespace braid::train
