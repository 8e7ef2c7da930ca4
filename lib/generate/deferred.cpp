#include "generate/deferred.hpp"

#include "io/deferred_file.hpp"

#include <utility>

namespace braid::gen {

void write_deferred(const std::filesystem::path& path, const Deferred& d) {
  io::DeferredArrays a;
  a.policy_step = d.policy_step;
  a.next_prompt = d.next_prompt;
  a.config = d.config;
  for (const DeferredSample& s : d.samples) {
    const Prompt& p = s.prompt;
    a.tokens.insert(a.tokens.end(), p.tokens.begin(), p.tokens.end());
    a.tokens.insert(a.tokens.end(), p.response.begin(), p.response.end());
    a.offsets.push_back(static_cast<std::int64_t>(a.tokens.size()));
    a.prompt_len.push_back(static_cast<std::int32_t>(p.tokens.size()));
    a.sample_id.push_back(static_cast<std::int64_t>(p.sample_id));
    a.finished.push_back(!s.finished ? io::kDeferredRunning
                         : s.finish == FinishReason::stop ? io::kDeferredStop
                                                          : io::kDeferredLength);
    a.logprobs.insert(a.logprobs.end(), p.logprobs.begin(), p.logprobs.end());
    a.raw_logprobs.insert(a.raw_logprobs.end(), p.raw_logprobs.begin(), p.raw_logprobs.end());
    a.token_policy_step.insert(a.token_policy_step.end(), s.policy_steps.begin(), s.policy_steps.end());
  }
  io::write_deferred_file(path, a);
}

Deferred read_deferred(const std::filesystem::path& path) {
  const io::DeferredArrays a = io::read_deferred_file(path);   // checked there
  Deferred d;
  d.policy_step = a.policy_step;
  d.next_prompt = a.next_prompt;
  d.config = a.config;
  std::size_t r = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    DeferredSample s;
    const auto b = a.tokens.begin() + a.offsets[i];
    const auto e = a.tokens.begin() + a.offsets[i + 1];
    s.prompt.sample_id = static_cast<std::uint64_t>(a.sample_id[i]);
    s.prompt.tokens.assign(b, b + a.prompt_len[i]);
    s.prompt.response.assign(b + a.prompt_len[i], e);
    const auto from = static_cast<std::ptrdiff_t>(r);
    const auto to = static_cast<std::ptrdiff_t>(r + s.prompt.response.size());
    s.prompt.logprobs.assign(a.logprobs.begin() + from, a.logprobs.begin() + to);
    s.prompt.raw_logprobs.assign(a.raw_logprobs.begin() + from, a.raw_logprobs.begin() + to);
    s.policy_steps.assign(a.token_policy_step.begin() + from, a.token_policy_step.begin() + to);
    r += s.prompt.response.size();
    s.finished = a.finished[i] != io::kDeferredRunning;
    s.finish = a.finished[i] == io::kDeferredStop ? FinishReason::stop : FinishReason::length;
    d.samples.push_back(std::move(s));
  }
  return d;
}

}  // namespace braid::gen
