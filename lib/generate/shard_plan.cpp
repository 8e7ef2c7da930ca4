#include "generate/shard_plan.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "io/fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

namespace braid::gen {
namespace {

// The meta.config keys that decide a shard's samples; the others (file names, limit)
// may change between a run and its rerun.
const char* const kSampleKeys[] = {"samples_per_prompt", "shard_size", "tokenizer", "max_new_tokens", "temperature",
                                   "top_p", "top_k", "seed", "stop_tokens"};

std::string setting_differences(const std::string& theirs, const std::string& ours) {
  const json a = json::parse(theirs, nullptr, false);
  const json b = json::parse(ours);
  if (!a.is_object()) return "its meta.config is not a JSON object";
  std::string out;
  for (const char* key : kSampleKeys) {
    const json x = a.value(key, json());
    const json y = b.value(key, json());
    if (x != y) out += fmt::format("{}{} {} there, {} here", out.empty() ? "" : "; ", key, x.dump(), y.dump());
  }
  return out;
}

}  // namespace

std::filesystem::path ShardPlan::path(std::int64_t shard) const {
  return dir / fmt::format("{}-{:05}.h5", prefix, shard);
}

io::SampleBatch shard_batch(std::span<const Sample> samples, std::span<const io::PromptOrigin> origins) {
  std::vector<const Sample*> order;
  for (const Sample& s : samples) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const Sample* a, const Sample* b) { return a->sample_id < b->sample_id; });
  io::SampleBatch b;
  b.logprobs_actor.emplace();
  if (!origins.empty()) b.origin.emplace();
  std::vector<std::int32_t> seq;
  for (const Sample* s : order) {
    seq = s->prompt;
    seq.insert(seq.end(), s->response.begin(), s->response.end());
    b.add(seq, static_cast<std::int32_t>(s->prompt.size()), static_cast<std::int64_t>(s->sample_id));
    std::copy(s->raw_logprobs.begin(), s->raw_logprobs.end(), b.logprobs_actor->end() - static_cast<std::ptrdiff_t>(s->response.size()));
    if (b.origin) b.origin->back() = origins[s->sample_id];
  }
  return b;
}

ShardState check_existing_shard(const ShardPlan& plan, std::int64_t shard, std::span<const Prompt> prompts,
                                const std::string& config, std::int64_t policy_step, std::string* why,
                                std::span<const io::PromptOrigin> origins, const std::string& made_from) {
  const auto path = plan.path(shard);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ShardState::missing;
  io::SampleShard s;
  try {
    s = io::read_sample_shard(path);
  } catch (const InputError& e) {
    if (why) *why = e.what();
    return ShardState::missing;
  }
  const std::string file = path.string();
  if (s.meta.policy_step != policy_step) {
    throw InputError(file, "meta.policy_step",
                     fmt::format("is {}, but the actor is step {}: samples of another policy are in this folder "
                                 "(use a new -o folder per iteration)",
                                 s.meta.policy_step, policy_step));
  }
  if (const auto diff = setting_differences(s.meta.config, config); !diff.empty()) {
    throw InputError(file, "meta.config",
                     "was generated with other settings (" + diff + "); remove it or write to another -o folder");
  }
  // The settings name the actor by path and step; the records know its content.
  const auto there = io::parse_made_from(s.meta.made_from, file);
  const auto now = io::parse_made_from(made_from, "this run's record");
  if (there && now) {
    const ordered_json a = there->value("inputs", ordered_json::object()).value("actor", ordered_json());
    const ordered_json b = now->value("inputs", ordered_json::object()).value("actor", ordered_json());
    if (a != b) {
      throw InputError(file, "made_from",
                       fmt::format("was generated from another actor than this run's (input actor: {} there, {} now); "
                                   "remove it or write to another -o folder",
                                   a.dump(), b.dump()));
    }
  }
  const io::SampleBatch& b = s.batch;
  std::vector<std::int64_t> expected;
  for (auto id = plan.first_sample(shard); id < plan.end_sample(shard); ++id) expected.push_back(id);
  if (b.sample_id != expected) {
    if (why) *why = fmt::format("it holds {} samples, this run puts {} there", b.size(), expected.size());
    return ShardState::stale;
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto& want = prompts[static_cast<std::size_t>(b.sample_id[i])].tokens;
    const auto have = b.prompt(i);
    if (!std::equal(have.begin(), have.end(), want.begin(), want.end())) {
      throw InputError(file, fmt::format("sample {}", b.sample_id[i]),
                       "has another prompt than this run's prompt file gives it; remove the shard or write to "
                       "another -o folder");
    }
  }
  if (!origins.empty()) {
    if (!b.origin) {
      if (why) *why = "it holds no prompt origins (extra fields), written by an older braid-generate";
      return ShardState::stale;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& want = origins[static_cast<std::size_t>(b.sample_id[i])].extra;
      if (json::parse((*b.origin)[i].extra) != json::parse(want)) {
        throw InputError(file, fmt::format("sample {}", b.sample_id[i]),
                         fmt::format("has other extra fields ({}) than this run's prompt file gives its prompt ({}); "
                                     "remove the shard or write to another -o folder",
                                     (*b.origin)[i].extra, want));
      }
    }
  }
  return ShardState::complete;
}

}  // namespace braid::gen
