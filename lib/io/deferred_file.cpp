#include "io/deferred_file.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "io/h5.hpp"
#include "io/shard_header.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace braid::io {

void write_deferred_file(const std::filesystem::path& path, const DeferredArrays& d) {
  AtomicFile out(path);
  auto f = h5::File::create(out.temp_path(), path.string());
  write_header(f, kDeferredFormat, kDeferredVersion);
  f.set_attr("policy_step", d.policy_step);
  f.set_attr("next_prompt", d.next_prompt);
  f.set_attr("config", d.config);
  f.write_1d<std::int32_t>("tokens", d.tokens);
  f.write_1d<std::int64_t>("offsets", d.offsets);
  f.write_1d<std::int32_t>("prompt_len", d.prompt_len);
  f.write_1d<std::int64_t>("sample_id", d.sample_id);
  f.write_1d<std::int32_t>("finished", d.finished);
  // Per response token (not per token as in a sample shard): what a continuation carries.
  f.write_1d<float>("response/logprobs", d.logprobs);
  f.write_1d<float>("response/raw_logprobs", d.raw_logprobs);
  f.write_1d<std::int64_t>("response/policy_step", d.token_policy_step);
  mark_complete(f);
  f.close();
  out.commit();
}

DeferredArrays read_deferred_file(const std::filesystem::path& path) {
  const auto f = h5::File::open_read(path);
  check_header(f, kDeferredFormat, kDeferredVersion);
  const std::string file = path.string();
  DeferredArrays d;
  d.policy_step = f.attr_int("policy_step").value_or(0);
  d.next_prompt = f.attr_int("next_prompt").value_or(-1);
  if (d.next_prompt < 0) throw InputError(file, "attribute next_prompt", "is missing or negative");
  d.config = f.attr_string("config").value_or("");
  if (parse_json_or_discarded(d.config).is_discarded()) {
    throw InputError(file, "attribute config",
                     fmt::format("is not valid JSON text (or nests deeper than {} levels)", kMaxJsonDepth));
  }
  d.tokens = f.read_1d<std::int32_t>("tokens");
  d.offsets = f.read_1d<std::int64_t>("offsets");
  d.prompt_len = f.read_1d<std::int32_t>("prompt_len");
  d.sample_id = f.read_1d<std::int64_t>("sample_id");
  d.finished = f.read_1d<std::int32_t>("finished");
  d.logprobs = f.read_1d<float>("response/logprobs");
  d.raw_logprobs = f.read_1d<float>("response/raw_logprobs");
  d.token_policy_step = f.read_1d<std::int64_t>("response/policy_step");
  const std::size_t n = d.prompt_len.size();
  const auto& offsets = d.offsets;
  if (offsets.size() != n + 1 || offsets.front() != 0 || offsets.back() != static_cast<std::int64_t>(d.tokens.size())) {
    throw InputError(file, "/offsets", fmt::format("expected {} entries from 0 to {} (the length of /tokens)", n + 1,
                                                   d.tokens.size()));
  }
  if (d.sample_id.size() != n) {
    throw InputError(file, "/sample_id", fmt::format("has {} entries, expected {}", d.sample_id.size(), n));
  }
  if (d.finished.size() != n) {
    throw InputError(file, "/finished", fmt::format("has {} entries, expected {}", d.finished.size(), n));
  }
  std::size_t response_tokens = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t len = offsets[i + 1] - offsets[i];
    if (len < 0 || d.prompt_len[i] < 1 || d.prompt_len[i] > len) {
      throw InputError(file, "/prompt_len",
                       fmt::format("sequence {} has prompt_len {} of {} tokens", i, d.prompt_len[i], len));
    }
    response_tokens += static_cast<std::size_t>(len - d.prompt_len[i]);
  }
  for (const auto& [name, size] : {std::pair{"/response/logprobs", d.logprobs.size()},
                                   {"/response/raw_logprobs", d.raw_logprobs.size()},
                                   {"/response/policy_step", d.token_policy_step.size()}}) {
    if (size != response_tokens) {
      throw InputError(file, name, fmt::format("has {} entries, expected {} (one per response token)", size, response_tokens));
    }
  }
  std::size_t r = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = d.sample_id[i];
    const auto len = static_cast<std::size_t>(offsets[i + 1] - offsets[i] - d.prompt_len[i]);
    for (std::size_t t = r; t < r + len; ++t) {
      if (!std::isfinite(d.logprobs[t]) || !std::isfinite(d.raw_logprobs[t])) {
        throw InputError(file, "/response/logprobs", fmt::format("sample {} has a logprob that is not finite", id));
      }
      if (d.token_policy_step[t] < 0 || d.token_policy_step[t] > d.policy_step) {
        throw InputError(file, "/response/policy_step",
                         fmt::format("sample {} has step {}, expected 0..{}", id, d.token_policy_step[t], d.policy_step));
      }
    }
    r += len;
    if (d.finished[i] < kDeferredRunning || d.finished[i] > kDeferredLength) {
      throw InputError(file, "/finished", fmt::format("sample {} has {}, expected 0, 1 or 2", id, d.finished[i]));
    }
    if (d.finished[i] != kDeferredRunning && len == 0) {
      throw InputError(file, "/finished", fmt::format("sample {} is finished with no response", id));
    }
    if (i > 0 && id <= d.sample_id[i - 1]) {
      throw InputError(file, "/sample_id", fmt::format("is not increasing at sequence {} ({} after {})", i, id, d.sample_id[i - 1]));
    }
  }
  return d;
}

}  // namespace braid::io
