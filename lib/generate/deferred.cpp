#include "generate/deferred.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "io/h5.hpp"
#include "io/shard_header.hpp"

#include <fmt/format.h>

#include <cmath>

namespace braid::gen {
namespace {

// finished: 0 = still running, 1 = ended by a stop token, 2 = by length.
constexpr std::int32_t kRunning = 0, kStop = 1, kLength = 2;

}  // namespace

void write_deferred(const std::filesystem::path& path, const Deferred& d) {
  std::vector<std::int32_t> tokens, prompt_len, finished;
  std::vector<std::int64_t> offsets{0}, ids, steps;
  std::vector<float> logprobs, raw;
  for (const DeferredSample& s : d.samples) {
    const Prompt& p = s.prompt;
    tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
    tokens.insert(tokens.end(), p.response.begin(), p.response.end());
    offsets.push_back(static_cast<std::int64_t>(tokens.size()));
    prompt_len.push_back(static_cast<std::int32_t>(p.tokens.size()));
    ids.push_back(static_cast<std::int64_t>(p.sample_id));
    finished.push_back(!s.finished ? kRunning : s.finish == FinishReason::stop ? kStop : kLength);
    logprobs.insert(logprobs.end(), p.logprobs.begin(), p.logprobs.end());
    raw.insert(raw.end(), p.raw_logprobs.begin(), p.raw_logprobs.end());
    steps.insert(steps.end(), s.policy_steps.begin(), s.policy_steps.end());
  }
  AtomicFile out(path);
  auto f = io::h5::File::create(out.temp_path(), path.string());
  io::write_header(f, kDeferredFormat, kDeferredVersion);
  f.set_attr("policy_step", d.policy_step);
  f.set_attr("next_prompt", d.next_prompt);
  f.set_attr("config", d.config);
  f.write_1d<std::int32_t>("tokens", tokens);
  f.write_1d<std::int64_t>("offsets", offsets);
  f.write_1d<std::int32_t>("prompt_len", prompt_len);
  f.write_1d<std::int64_t>("sample_id", ids);
  f.write_1d<std::int32_t>("finished", finished);
  // Per response token (not per token as in a sample shard): what a continuation carries.
  f.write_1d<float>("response/logprobs", logprobs);
  f.write_1d<float>("response/raw_logprobs", raw);
  f.write_1d<std::int64_t>("response/policy_step", steps);
  io::mark_complete(f);
  f.close();
  out.commit();
}

Deferred read_deferred(const std::filesystem::path& path) {
  const auto f = io::h5::File::open_read(path);
  io::check_header(f, kDeferredFormat, kDeferredVersion);
  const std::string file = path.string();
  Deferred d;
  d.policy_step = f.attr_int("policy_step").value_or(0);
  d.next_prompt = f.attr_int("next_prompt").value_or(-1);
  if (d.next_prompt < 0) throw InputError(file, "attribute next_prompt", "is missing or negative");
  d.config = f.attr_string("config").value_or("");
  if (!json::accept(d.config)) throw InputError(file, "attribute config", "is not valid JSON text");
  const auto tokens = f.read_1d<std::int32_t>("tokens");
  const auto offsets = f.read_1d<std::int64_t>("offsets");
  const auto prompt_len = f.read_1d<std::int32_t>("prompt_len");
  const auto ids = f.read_1d<std::int64_t>("sample_id");
  const auto finished = f.read_1d<std::int32_t>("finished");
  const auto logprobs = f.read_1d<float>("response/logprobs");
  const auto raw = f.read_1d<float>("response/raw_logprobs");
  const auto steps = f.read_1d<std::int64_t>("response/policy_step");
  const std::size_t n = prompt_len.size();
  if (offsets.size() != n + 1 || offsets.front() != 0 || offsets.back() != static_cast<std::int64_t>(tokens.size())) {
    throw InputError(file, "/offsets", fmt::format("expected {} entries from 0 to {} (the length of /tokens)", n + 1,
                                                   tokens.size()));
  }
  if (ids.size() != n) throw InputError(file, "/sample_id", fmt::format("has {} entries, expected {}", ids.size(), n));
  if (finished.size() != n) throw InputError(file, "/finished", fmt::format("has {} entries, expected {}", finished.size(), n));
  std::size_t response_tokens = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t len = offsets[i + 1] - offsets[i];
    if (len < 0 || prompt_len[i] < 1 || prompt_len[i] > len) {
      throw InputError(file, "/prompt_len", fmt::format("sequence {} has prompt_len {} of {} tokens", i, prompt_len[i], len));
    }
    response_tokens += static_cast<std::size_t>(len - prompt_len[i]);
  }
  for (const auto& [name, size] : {std::pair{"/response/logprobs", logprobs.size()},
                                   {"/response/raw_logprobs", raw.size()}, {"/response/policy_step", steps.size()}}) {
    if (size != response_tokens) {
      throw InputError(file, name, fmt::format("has {} entries, expected {} (one per response token)", size, response_tokens));
    }
  }
  std::size_t r = 0;
  for (std::size_t i = 0; i < n; ++i) {
    DeferredSample s;
    const auto b = tokens.begin() + offsets[i];
    const auto e = tokens.begin() + offsets[i + 1];
    s.prompt.sample_id = static_cast<std::uint64_t>(ids[i]);
    s.prompt.tokens.assign(b, b + prompt_len[i]);
    s.prompt.response.assign(b + prompt_len[i], e);
    const std::size_t len = s.prompt.response.size();
    s.prompt.logprobs.assign(logprobs.begin() + static_cast<std::ptrdiff_t>(r), logprobs.begin() + static_cast<std::ptrdiff_t>(r + len));
    s.prompt.raw_logprobs.assign(raw.begin() + static_cast<std::ptrdiff_t>(r), raw.begin() + static_cast<std::ptrdiff_t>(r + len));
    s.policy_steps.assign(steps.begin() + static_cast<std::ptrdiff_t>(r), steps.begin() + static_cast<std::ptrdiff_t>(r + len));
    r += len;
    for (std::size_t t = 0; t < len; ++t) {
      if (!std::isfinite(s.prompt.logprobs[t]) || !std::isfinite(s.prompt.raw_logprobs[t])) {
        throw InputError(file, "/response/logprobs", fmt::format("sample {} has a logprob that is not finite", ids[i]));
      }
      if (s.policy_steps[t] < 0 || s.policy_steps[t] > d.policy_step) {
        throw InputError(file, "/response/policy_step",
                         fmt::format("sample {} has step {}, expected 0..{}", ids[i], s.policy_steps[t], d.policy_step));
      }
    }
    if (finished[i] < kRunning || finished[i] > kLength) {
      throw InputError(file, "/finished", fmt::format("sample {} has {}, expected 0, 1 or 2", ids[i], finished[i]));
    }
    s.finished = finished[i] != kRunning;
    s.finish = finished[i] == kStop ? FinishReason::stop : FinishReason::length;
    if (s.finished && len == 0) throw InputError(file, "/finished", fmt::format("sample {} is finished with no response", ids[i]));
    if (i > 0 && ids[i] <= ids[i - 1]) {
      throw InputError(file, "/sample_id", fmt::format("is not increasing at sequence {} ({} after {})", i, ids[i], ids[i - 1]));
    }
    d.samples.push_back(std::move(s));
  }
  return d;
}

}  // namespace braid::gen
