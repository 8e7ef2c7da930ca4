#include "train/train_inputs.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "io/sample_shard.hpp"
#include "train/staleness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>

namespace braid::train {

namespace {

void append(io::SampleBatch& into, const io::SampleBatch& from, bool first) {
  const std::int64_t base = static_cast<std::int64_t>(into.tokens.size());
  into.tokens.insert(into.tokens.end(), from.tokens.begin(), from.tokens.end());
  for (std::size_t i = 1; i < from.offsets.size(); ++i) into.offsets.push_back(base + from.offsets[i]);
  into.prompt_len.insert(into.prompt_len.end(), from.prompt_len.begin(), from.prompt_len.end());
  into.sample_id.insert(into.sample_id.end(), from.sample_id.begin(), from.sample_id.end());
  // An array stays only while every shard so far has it.
  auto merge = [&](std::optional<std::vector<float>>& dst, const std::optional<std::vector<float>>& src) {
    if (first && src) dst.emplace();
    if (!src) dst.reset();
    if (dst) dst->insert(dst->end(), src->begin(), src->end());
  };
  merge(into.reward, from.reward);
  if (first) into.policy_step.emplace();
  into.policy_step->insert(into.policy_step->end(), from.policy_step->begin(), from.policy_step->end());
  for (const auto& f : io::token_array_fields()) merge(into.*f.member, from.*f.member);
}

void add_shard(TrainingShards& out, const std::filesystem::path& path, std::span<const std::string> required) {
  io::SampleShard s = io::read_sample_shard(path);
  for (const std::string& name : required) {
    const auto* field = std::find_if(io::token_array_fields().begin(), io::token_array_fields().end(),
                                     [&](const io::TokenArrayField& f) { return name == f.path; });
    const bool present = field != io::token_array_fields().end() ? bool(s.batch.*field->member)
                                                                 : (name == "reward" && bool(s.batch.reward));
    if (!present) {
      throw InputError(path.string(), "/" + name,
                       "is missing: braid-train needs scored shards (run braid-score on this shard first)");
    }
  }
  const bool first = out.files.empty();
  fill_policy_steps(s.batch, s.meta.policy_step);
  if (first) {
    out.policy_step = s.meta.policy_step;
    out.config = s.meta.config;
  } else if (s.meta.policy_step != out.policy_step) {
    log::warn("{}: policy_step {} differs from the first input's {} (off-policy samples)", path.string(),
              s.meta.policy_step, out.policy_step);
  }
  append(out.batch, s.batch, first);
  out.files.push_back(path);
}

}  // namespace

void check_sequences_fit(const io::SampleBatch& b, std::size_t from, const model::ModelConfig& cfg,
                         const std::string& file, const std::string& role) {
  for (std::size_t i = from; i < b.size(); ++i) {
    if (static_cast<std::int64_t>(b.length(i)) > cfg.max_position_embeddings) {
      throw InputError(file, "/offsets", fmt::format("sequence {} has {} tokens, more than the {}'s {} positions",
                                                     i - from, b.length(i), role, cfg.max_position_embeddings));
    }
    for (auto t : b.sequence(i)) {
      if (t < 0 || t >= cfg.vocab_size) {
        throw InputError(file, "/tokens", fmt::format("token {} of sequence {} is outside the {}'s vocabulary of {}",
                                                      t, i - from, role, cfg.vocab_size));
      }
    }
  }
}

TrainingShards read_training_shards(const std::vector<std::string>& args, std::span<const std::string> required,
                                    const OnShardRead& on_read) {
  TrainingShards out;
  auto one = [&](const std::filesystem::path& p) {
    const std::size_t first = out.batch.size();
    add_shard(out, p, required);
    if (on_read) on_read(p, out.batch, first);
  };
  for (const std::string& a : args) {
    if (a != "-") {
      one(a);
      continue;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) one(path_from_line(line, "<stdin>"));
    }
  }
  if (out.files.empty()) throw UsageError("no input shards (name them, or '-' to read their paths from stdin)");
  return out;
}

}  // namespace braid::train
