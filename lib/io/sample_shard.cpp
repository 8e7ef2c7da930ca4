#include "io/sample_shard.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "io/finite.hpp"
#include "io/fingerprint.hpp"
#include "io/h5.hpp"
#include "io/shard_header.hpp"

namespace braid::io {
namespace {

constexpr const char* kTokens = "tokens";
constexpr const char* kOffsets = "offsets";
constexpr const char* kPromptLen = "prompt_len";
constexpr const char* kSampleId = "sample_id";
constexpr const char* kReward = "reward";
constexpr const char* kPromptLine = "prompt/line";
constexpr const char* kPromptExtra = "prompt/extra";
constexpr const char* kPromptExtraOffsets = "prompt/extra_offsets";
constexpr const char* kPolicyStep = "policy_step";

bool known_dataset(const std::string& path) {
  for (const char* p : {kTokens, kOffsets, kPromptLen, kSampleId, kReward, kPromptLine, kPromptExtra, kPromptExtraOffsets, kPolicyStep}) {
    if (path == p) return true;
  }
  for (const auto& f : token_array_fields()) {
    if (path == f.path) return true;
  }
  return false;
}

SampleShardMeta read_meta(const h5::File& f) {
  SampleShardMeta meta;
  meta.policy_step = f.attr_int("policy_step").value_or(0);
  meta.created_by = f.attr_string("created_by").value_or("");
  meta.config = f.attr_string("config").value_or("");
  if (!meta.config.empty() && parse_json_or_discarded(meta.config).is_discarded()) {
    throw InputError(f.name(), "attribute config",
                     fmt::format("is not valid JSON text (or nests deeper than {} levels)", kMaxJsonDepth));
  }
  meta.made_from = f.attr_string("made_from").value_or("");
  parse_made_from(meta.made_from, f.name());
  return meta;
}

// Opens the file, checks the header, and reads the layout (offsets and prompt
// lengths in full, the rest as sizes). Throws one InputError listing every problem.
SampleLayout read_layout(const h5::File& f) {
  check_header(f, kSamplesFormat, kSamplesVersion);
  SampleLayout l;
  l.tokens = f.length_1d<std::int32_t>(kTokens);
  l.offsets = f.read_1d<std::int64_t>(kOffsets);
  l.prompt_len = f.read_1d<std::int32_t>(kPromptLen);
  l.sample_ids = f.length_1d<std::int64_t>(kSampleId);
  if (f.has_dataset(kReward)) l.rewards = f.length_1d<float>(kReward);
  for (const auto& field : token_array_fields()) {
    if (f.has_dataset(field.path)) l.token_arrays.emplace_back(field.path, f.length_1d<float>(field.path));
  }
  if (f.has_dataset(kPolicyStep)) l.policy_steps = f.length_1d<std::int64_t>(kPolicyStep);
  if (f.has_dataset(kPromptLine)) l.origin_lines = f.length_1d<std::int64_t>(kPromptLine);
  if (f.has_dataset(kPromptExtraOffsets)) l.extra_offsets = f.read_1d<std::int64_t>(kPromptExtraOffsets);
  if (f.has_dataset(kPromptExtra)) l.extra_bytes = f.length_1d<std::uint8_t>(kPromptExtra);
  auto problems = layout_problems(l);
  if (!problems.empty()) throw InputError(f.name(), problems);
  return l;
}

// What a shard's meta.config says made it: braid-generate ({"stage": "generate", ...}) or
// braid-score (a "score" entry with its algorithm). Such a shard must hold the arrays that
// stage writes, and every token id below the actor's vocab_size the generation recorded.
std::vector<std::string> declared_content_problems(const SampleShardMeta& meta, const SampleBatch& b) {
  std::vector<std::string> out;
  if (meta.config.empty()) return out;
  const json c = json::parse(meta.config, nullptr, false);
  if (!c.is_object()) return out;
  const json* gen = c.value("stage", "") == "generate" ? &c : c.contains("generate") && c["generate"].is_object() ? &c["generate"] : nullptr;
  const json* score = c.contains("score") && c["score"].is_object() ? &c["score"] : nullptr;
  std::vector<std::string> required;
  if (gen != nullptr) required.emplace_back("logprobs/actor");
  if (score != nullptr) {
    required.insert(required.end(), {"logprobs/actor", "advantages"});
    if (score->value("algorithm", "") == "ppo") required.insert(required.end(), {"values", "returns"});
    if (score->contains("ref")) required.emplace_back("logprobs/ref");
    if (!b.reward) out.emplace_back("/reward: missing, but meta.config says braid-score made the shard");
  }
  for (const auto& path : required) {
    const auto field = std::find_if(token_array_fields().begin(), token_array_fields().end(),
                                    [&](const TokenArrayField& f) { return f.path == path; });
    if (field != token_array_fields().end() && !(b.*(field->member)) &&
        std::find_if(out.begin(), out.end(), [&](const std::string& p) { return p.starts_with("/" + path + ":"); }) == out.end()) {
      out.push_back(fmt::format("/{}: missing, but meta.config says {} made the shard", path,
                                score != nullptr ? "braid-score" : "braid-generate"));
    }
  }
  if (gen != nullptr && gen->contains("vocab_size") && (*gen)["vocab_size"].is_number_integer()) {
    const auto vocab = (*gen)["vocab_size"].get<std::int64_t>();
    const auto bad = std::find_if(b.tokens.begin(), b.tokens.end(), [&](std::int32_t t) { return t >= vocab; });
    if (bad != b.tokens.end()) {
      out.push_back(fmt::format("/tokens: token {} is {}, not below the actor's vocab_size {} (meta.config)",
                                bad - b.tokens.begin(), *bad, vocab));
    }
  }
  return out;
}

}  // namespace

void write_sample_shard(const std::filesystem::path& path, const SampleBatch& batch, const SampleShardMeta& meta) {
  if (auto problems = batch.problems(); !problems.empty()) {
    throw std::invalid_argument(fmt::format("refusing to write {}: {}", path.string(), fmt::join(problems, "; ")));
  }
  require_finite(batch, path.string(), "computed, refusing to write it");
  AtomicFile out(path);
  auto f = h5::File::create(out.temp_path(), path.string());
  write_header(f, kSamplesFormat, kSamplesVersion);
  f.set_attr("policy_step", meta.policy_step);
  f.set_attr("created_by", meta.created_by);
  f.set_attr("config", meta.config);
  if (!meta.made_from.empty()) f.set_attr("made_from", meta.made_from);
  f.write_1d<std::int32_t>(kTokens, batch.tokens);
  f.write_1d<std::int64_t>(kOffsets, batch.offsets);
  f.write_1d<std::int32_t>(kPromptLen, batch.prompt_len);
  f.write_1d<std::int64_t>(kSampleId, batch.sample_id);
  if (batch.reward) f.write_1d<float>(kReward, *batch.reward);
  if (batch.policy_step) f.write_1d<std::int64_t>(kPolicyStep, *batch.policy_step);
  if (batch.origin) {
    std::vector<std::int64_t> lines, offsets{0};
    std::vector<std::uint8_t> bytes;
    for (const auto& o : *batch.origin) {
      lines.push_back(o.line);
      bytes.insert(bytes.end(), o.extra.begin(), o.extra.end());
      offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    }
    f.write_1d<std::int64_t>(kPromptLine, lines);
    f.write_1d<std::uint8_t>(kPromptExtra, bytes);
    f.write_1d<std::int64_t>(kPromptExtraOffsets, offsets);
  }
  for (const auto& field : token_array_fields()) {
    if (const auto& arr = batch.*field.member) f.write_1d<float>(field.path, *arr);
  }
  mark_complete(f);
  f.close();
  out.commit();
}

SampleShard read_sample_shard(const std::filesystem::path& path) {
  const auto f = h5::File::open_read(path);
  SampleLayout layout = read_layout(f);
  SampleShard s;
  s.meta = read_meta(f);
  SampleBatch& b = s.batch;
  b.tokens = f.read_1d<std::int32_t>(kTokens);
  b.offsets = std::move(layout.offsets);
  b.prompt_len = std::move(layout.prompt_len);
  b.sample_id = f.read_1d<std::int64_t>(kSampleId);
  // A sample id names one sample across the run (score groups and train order by it): two
  // sequences under one id would be scored and trained as one.
  std::unordered_map<std::int64_t, std::size_t> first_at;
  for (std::size_t i = 0; i < b.sample_id.size(); ++i) {
    const auto [it, fresh] = first_at.emplace(b.sample_id[i], i);
    if (!fresh) {
      throw InputError(f.name(), "/sample_id",
                       fmt::format("sample_id {} appears twice (sequences {} and {}); ids must be unique in a shard",
                                   b.sample_id[i], it->second, i));
    }
  }
  if (layout.rewards) b.reward = f.read_1d<float>(kReward);
  if (layout.policy_steps) {
    b.policy_step = f.read_1d<std::int64_t>(kPolicyStep);
    for (std::size_t i = 0; i < b.size(); ++i) {
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
        const std::int64_t step = (*b.policy_step)[t];
        if (step < 0 || step > s.meta.policy_step) {
          throw InputError(f.name(), "/policy_step",
                           fmt::format("token {} of sequence {} has step {}, expected 0..{} (the shard's "
                                       "policy_step: no token comes from a later policy)",
                                       t - b.begin(i), i, step, s.meta.policy_step));
        }
      }
    }
  }
  if (layout.extra_offsets) {
    const auto lines = f.read_1d<std::int64_t>(kPromptLine);
    const auto bytes = f.read_1d<std::uint8_t>(kPromptExtra);
    const auto& eo = *layout.extra_offsets;
    auto& origin = b.origin.emplace(lines.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      origin[i].line = lines[i];
      origin[i].extra.assign(bytes.begin() + eo[i], bytes.begin() + eo[i + 1]);
    }
    if (auto bad = extra_problem(origin)) throw InputError(f.name(), std::vector<std::string>{*bad});
  }
  for (const auto& field : token_array_fields()) {
    if (f.has_dataset(field.path)) b.*field.member = f.read_1d<float>(field.path);
  }
  auto bad = std::find_if(b.tokens.begin(), b.tokens.end(), [](std::int32_t t) { return t < 0; });
  if (bad != b.tokens.end()) {
    throw InputError(f.name(), "/tokens",
                     fmt::format("token {} is {}, expected a token id >= 0", bad - b.tokens.begin(), *bad));
  }
  if (const auto problems = declared_content_problems(s.meta, b); !problems.empty()) throw InputError(f.name(), problems);
  require_finite(b, f.name(), "stored");
  return s;
}

SampleShardInfo probe_sample_shard(const std::filesystem::path& path) {
  const auto f = h5::File::open_read(path);
  const SampleLayout layout = read_layout(f);
  SampleShardInfo info;
  info.meta = read_meta(f);
  info.version = static_cast<int>(f.attr_int(kAttrVersion).value_or(0));
  info.sequences = static_cast<std::int64_t>(layout.offsets.size()) - 1;
  info.tokens = layout.tokens;
  for (std::size_t i = 1; i < layout.offsets.size(); ++i) {
    info.longest = std::max<std::int64_t>(info.longest, layout.offsets[i] - layout.offsets[i - 1]);
  }
  info.has_reward = layout.rewards.has_value();
  for (const auto& [p, _] : layout.token_arrays) info.token_arrays.push_back(p);
  if (layout.policy_steps) info.token_arrays.emplace_back(kPolicyStep);
  for (const auto& p : f.dataset_paths()) {
    if (!known_dataset(p)) info.other_datasets.push_back(p);
  }
  return info;
}

}  // namespace braid::io
