#include "score/shard_stream.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "score/advantages.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <regex>

namespace braid::score {

std::filesystem::path output_path(const std::filesystem::path& out_dir, const std::string& input,
                                  const std::string& prefix) {
  const std::string stem = std::filesystem::path(input).stem().string();
  static const std::regex numbered("^.*-([0-9]+)$");
  std::smatch m;
  if (std::regex_match(stem, m, numbered)) return out_dir / fmt::format("{}-{}.h5", prefix, m[1].str());
  return out_dir / fmt::format("{}-{}.h5", prefix, stem);
}

std::string forward_config(const std::string& input_config, const json& score_config, const std::string& file) {
  json history = json::object();
  if (!input_config.empty()) {
    json in;
    try {
      in = json::parse(input_config);
    } catch (const json::exception&) {
      throw InputError(file, "attribute config", "is not valid JSON text");
    }
    if (!in.is_object()) throw InputError(file, "attribute config", "is not a JSON object");
    if (in.contains("stage") && in["stage"].is_string()) {
      history[in["stage"].get<std::string>()] = in;
    } else {
      history = in;
    }
  }
  history["score"] = score_config;
  return history.dump();
}

namespace {

// An integer setting of the generation a shard came from (its meta.config, or the
// "generate" entry of a history); 0 when it does not say.
std::int64_t generate_setting(const std::string& config, const char* key) {
  if (config.empty()) return 0;
  const json cfg = json::parse(config, nullptr, /*allow_exceptions=*/false);
  for (const json* obj : {&cfg, cfg.is_object() && cfg.contains("generate") ? &cfg["generate"] : nullptr}) {
    if (obj && obj->is_object() && obj->contains(key) && (*obj)[key].is_number_integer()) {
      return (*obj)[key].get<std::int64_t>();
    }
  }
  return 0;
}

}  // namespace

std::int64_t samples_per_prompt_in_config(const std::string& config) {
  return generate_setting(config, "samples_per_prompt");
}

std::int64_t max_new_tokens_in_config(const std::string& config) { return generate_setting(config, "max_new_tokens"); }

std::string prompts_file_of(const std::string& config) {
  const json cfg = json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object()) return "";
  for (const json* obj : {&cfg, cfg.contains("generate") ? &cfg["generate"] : nullptr}) {
    if (obj && obj->is_object() && obj->value("stage", "") == "generate" && obj->contains("prompts") &&
        (*obj)["prompts"].is_string()) {
      return (*obj)["prompts"].get<std::string>();
    }
  }
  return "";
}

ShardStream::ShardStream(BatchScorer& scorer, StreamOptions opt,
                         std::function<void(const std::filesystem::path&)> on_output, Progress* progress)
    : scorer_(&scorer), opt_(std::move(opt)), on_output_(std::move(on_output)), progress_(progress) {
  std::filesystem::create_directories(opt_.out_dir);
}

bool ShardStream::already_done(const std::string& input, const std::filesystem::path& out, const ordered_json& record) {
  if (!std::filesystem::exists(out)) return false;
  const io::SampleShardInfo in = io::probe_sample_shard(input);
  skipped_sequences_ = in.sequences;
  io::SampleShardInfo done;
  try {
    done = io::probe_sample_shard(out);
  } catch (const InputError& e) {
    log::warn("{} exists but cannot be read ({}): scoring again", out.string(), e.what());
    return false;
  }
  const auto has = [&](const char* name) {
    return std::find(done.token_arrays.begin(), done.token_arrays.end(), name) != done.token_arrays.end();
  };
  if (done.sequences != in.sequences || !done.has_reward || !has("advantages") || !has("returns")) {
    log::warn("{} exists but is not a scoring of {} ({} of {} sequences, or arrays missing): scoring again",
              out.string(), input, done.sequences, in.sequences);
    return false;
  }
  if (record.empty()) return true;
  // A whole scoring made from other inputs or settings is not damage to score over: refused.
  const auto there = io::parse_made_from(done.meta.made_from, out.string());
  const auto diff = there ? io::made_from_differences(*there, record)
                          : std::vector<std::string>{"it records nothing of what made it (a braid before records, or "
                                                     "another tool)"};
  if (diff.empty()) return true;
  throw InputError(out.string(), "made_from",
                   fmt::format("is already there, made from other inputs or settings: {}. Remove it, or write to "
                               "another -o folder",
                               fmt::join(diff, "; ")));
}

bool ShardStream::writes() const { return !opt_.tp_group || opt_.tp_group->rank() == 0; }

std::int64_t ShardStream::samples_per_prompt_of(const io::SampleShardMeta& meta, const std::string& input) {
  const std::int64_t found = samples_per_prompt_in_config(meta.config);
  if (opt_.samples_per_prompt > 0) {
    if (found > 0 && found != opt_.samples_per_prompt) {
      throw InputError(input, "attribute config",
                       fmt::format("says samples_per_prompt {}, --samples-per-prompt says {}: GRPO's groups would be "
                                   "cut otherwise than the generation made them (leave --samples-per-prompt out, or "
                                   "give {})",
                                   found, opt_.samples_per_prompt, found));
    }
  } else if (found <= 0) {
    throw InputError(input, "attribute config",
                     "has no samples_per_prompt (GRPO groups samples by prompt): pass --samples-per-prompt N");
  }
  const std::int64_t group = opt_.samples_per_prompt > 0 ? opt_.samples_per_prompt : found;
  if (group < 2) {
    throw InputError(input, "attribute config",
                     fmt::format("samples_per_prompt is 1: under {} a sample's advantage is its reward against the "
                                 "others of its prompt's group, and a group of one has none (every advantage would be "
                                 "0); generate 2 or more samples per prompt",
                                 scorer_->settings().algorithm));
  }
  return group;
}

void ShardStream::record_rewards(const io::SampleBatch& b, const std::string& input) {
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::int64_t id = b.sample_id[i];
    if (!groups_->add(id, scorer_->group_reward(b, i))) {
      throw InputError(input, "/sample_id",
                       fmt::format("sample {} (sequence {}) was already read from {}", id, i, sample_origin_[id]));
    }
    sample_origin_[id] = input;
  }
}

void ShardStream::write(const std::filesystem::path& out, io::SampleShard& shard, const std::string& input) {
  if (!writes()) return;
  io::write_sample_shard(out, shard.batch, shard.meta);
  ++totals_.shards_scored;
  log::info("wrote {} ({} sequences of {})", out.string(), shard.batch.size(), input);
  on_output_(out);
}

void ShardStream::write_ready_groups() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const bool ready = std::all_of(it->groups.begin(), it->groups.end(), [&](std::int64_t g) { return groups_->complete(g); });
    if (!ready) {
      ++it;
      continue;
    }
    group_advantages(it->shard.batch, *groups_, scorer_->settings().group_options());
    write(it->output, it->shard, it->input);
    it = pending_.erase(it);
  }
}

void ShardStream::add(const std::string& input) {
  const std::filesystem::path out = output_path(opt_.out_dir, input, opt_.prefix);
  if (auto it = outputs_.find(out); it != outputs_.end()) {
    throw InputError(input, "", fmt::format("its output {} is already the output of {} (inputs need distinct names)",
                                            out.string(), it->second));
  }
  outputs_[out] = input;
  const bool grpo = scorer_->settings().grouped();

  // One decision per tp group, its rank 0's: a rank that looked after rank 0 had
  // written the output would skip passes the others run.
  ordered_json record;
  if (opt_.made_from) {
    io::MadeFrom m = *opt_.made_from;
    m.add_input("samples", {input});
    record = m.to_json();
  }
  std::int64_t done = writes() && already_done(input, out, record) ? 1 : 0;
  if (opt_.tp_group) {
    opt_.tp_group->broadcast(std::span<std::int64_t>(&done, 1), 0);
    if (done && !writes()) skipped_sequences_ = io::probe_sample_shard(input).sequences;
  }
  if (done) {
    if (writes()) log::info("{} is already scored in {}: skipped", input, out.string());
    ++totals_.shards_skipped;
    if (progress_) progress_->advance(static_cast<std::uint64_t>(skipped_sequences_));
    if (grpo) {
      const io::SampleShard scored = io::read_sample_shard(out);
      if (!groups_) groups_.emplace(samples_per_prompt_of(scored.meta, out.string()));
      record_rewards(scored.batch, out.string());
    }
    if (writes()) on_output_(out);
    if (grpo) write_ready_groups();
    return;
  }

  io::SampleShard shard = io::read_sample_shard(input);
  io::SampleBatch& b = shard.batch;
  scorer_->check(b, input);
  if (grpo && !groups_) groups_.emplace(samples_per_prompt_of(shard.meta, input));
  scorer_->score(b, input, prompts_file_of(shard.meta.config), max_new_tokens_in_config(shard.meta.config));

  totals_.sequences += static_cast<std::int64_t>(b.size());
  totals_.tokens += static_cast<std::int64_t>(b.token_count());
  for (std::size_t i = 0; i < b.size(); ++i) {
    totals_.reward_sum += (*b.reward)[i];
    totals_.response_tokens += static_cast<std::int64_t>(b.response_length(i));
    if (b.logprobs_ref) {
      const auto a = b.response_of(*b.logprobs_actor, i), r = b.response_of(*b.logprobs_ref, i);
      for (std::size_t t = 0; t < a.size(); ++t) totals_.kl_sum += double(a[t]) - double(r[t]);
    }
  }
  if (progress_) {
    progress_->advance(b.size());
    const double mean_reward = totals_.sequences > 0 ? totals_.reward_sum / double(totals_.sequences) : 0.0;
    progress_->set_status(fmt::format("mean reward {:.3f}", mean_reward));
  }

  shard.meta.config = forward_config(shard.meta.config, opt_.score_config, input);
  shard.meta.created_by = opt_.created_by;
  shard.meta.made_from = record.empty() ? "" : record.dump();
  if (!grpo) {
    write(out, shard, input);
    return;
  }
  record_rewards(b, input);
  Pending p{input, out, std::move(shard), {}};
  for (std::int64_t id : p.shard.batch.sample_id) p.groups.insert(groups_->group_of(id));
  pending_.push_back(std::move(p));
  write_ready_groups();
}

void ShardStream::finish() {
  if (pending_.empty()) return;
  std::vector<std::string> problems;
  for (const Pending& p : pending_) {
    for (std::int64_t g : p.groups) {
      if (!groups_->complete(g)) {
        problems.push_back(fmt::format("{}: /sample_id: group {} (samples {}..{}) has {} of its {} samples", p.input, g,
                                       g * groups_->samples_per_prompt(), (g + 1) * groups_->samples_per_prompt() - 1,
                                       groups_->count(g), groups_->samples_per_prompt()));
      }
    }
  }
  throw InputError("incomplete GRPO groups at the end of the input", problems);
}

}  // namespace braid::score
