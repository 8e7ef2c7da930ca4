#include "train/train_inputs.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "io/sample_shard.hpp"
#include "train/staleness.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <sstream>

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
      if (!line.empty()) one(line);
    }
  }
  if (out.files.empty()) throw UsageError("no input shards (name them, or '-' to read their paths from stdin)");
  return out;
}

namespace {

struct TextLine {
  std::int64_t line = 0;
  json obj;
};

// Every non-blank line as a JSON object with exactly `keys` (strings); one InputError for all bad lines.
std::vector<TextLine> read_lines(const std::string& path, const std::vector<std::string>& keys) {
  const std::string text = read_text_file(path);
  Checker c(path);
  std::vector<TextLine> out;
  std::istringstream in(text);
  std::string line;
  for (std::int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("line {}", n);
    json obj = json::parse(line, nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) {
      c.fail(where, "is not a JSON object");
      continue;
    }
    for (const auto& k : keys) c.string(obj, where, k);
    c.no_unknown_keys(obj, where, keys);
    out.push_back({n, std::move(obj)});
  }
  c.check();
  if (out.empty()) throw InputError(path, "", "holds no examples");
  return out;
}

std::vector<std::int32_t> encode(const tok::Tokenizer& tok, const json& obj, const std::string& key) {
  return obj.contains(key) && obj[key].is_string() ? tok.encode(obj[key].get<std::string>()) : std::vector<std::int32_t>{};
}

void check_sequence(Checker& c, const std::string& where, const std::vector<std::int32_t>& seq, std::int32_t vocab,
                    std::int64_t max_len) {
  if (max_len > 0 && static_cast<std::int64_t>(seq.size()) > max_len) {
    c.fail(where, fmt::format("{} tokens exceed the model's {} positions", seq.size(), max_len));
  }
  for (auto t : seq) {
    if (t < 0 || t >= vocab) {
      c.fail(where, fmt::format("token {} is outside the model's vocabulary of {}", t, vocab));
      break;
    }
  }
}

std::vector<std::int32_t> with_bos(const tok::Tokenizer& tok, std::vector<std::int32_t> ids) {
  if (tok.bos()) ids.insert(ids.begin(), *tok.bos());
  return ids;
}

}  // namespace

io::SampleBatch read_sft_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                               std::int64_t max_len) {
  const auto lines = read_lines(path, {"prompt", "response"});
  Checker c(path);
  io::SampleBatch b;
  for (const auto& l : lines) {
    const auto prompt = with_bos(tok, encode(tok, l.obj, "prompt"));
    auto seq = prompt;
    const auto response = encode(tok, l.obj, "response");
    seq.insert(seq.end(), response.begin(), response.end());
    if (tok.eos()) seq.push_back(*tok.eos());
    const std::string where = fmt::format("line {}", l.line);
    if (prompt.empty()) c.fail(where + ".prompt", "is empty and the tokenizer has no BOS to start from");
    if (seq.size() == prompt.size()) c.fail(where + ".response", "is empty");
    check_sequence(c, where, seq, vocab_size, max_len);
    b.add(seq, static_cast<std::int32_t>(prompt.size()), static_cast<std::int64_t>(b.size()));
  }
  c.check();
  return b;
}

io::SampleBatch read_preference_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                                      std::int64_t max_len) {
  const auto lines = read_lines(path, {"prompt", "chosen", "rejected"});
  Checker c(path);
  io::SampleBatch b;
  for (const auto& l : lines) {
    const auto prompt = with_bos(tok, encode(tok, l.obj, "prompt"));
    for (const char* key : {"chosen", "rejected"}) {
      auto seq = prompt;
      const auto completion = encode(tok, l.obj, key);
      seq.insert(seq.end(), completion.begin(), completion.end());
      if (tok.eos()) seq.push_back(*tok.eos());
      const std::string where = fmt::format("line {}.{}", l.line, key);
      if (completion.empty()) c.fail(where, "is empty");
      check_sequence(c, where, seq, vocab_size, max_len);
      b.add(seq, static_cast<std::int32_t>(prompt.size()), static_cast<std::int64_t>(b.size()));
    }
  }
  c.check();
  return b;
}

}  // namespace braid::train
