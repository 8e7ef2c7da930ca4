#include "core/error.hpp"
#include "io/deferred_file.hpp"
#include "io/h5.hpp"
#include "io/inspect_kinds.hpp"

#include <algorithm>

namespace braid::io::detail {

ordered_json summarize_deferred(const std::string& path) {
  const DeferredArrays d = read_deferred_file(path);   // every array checked
  const h5::ChecksumReport sums = h5::File::open_read(path).verify_checksums();
  if (!sums.mismatched.empty()) throw InputError(path, sums.mismatched);
  std::vector<double> prompt_len, response_len, steps_behind;
  std::int64_t running = 0, stopped = 0, at_length = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const auto len = d.offsets[i + 1] - d.offsets[i];
    prompt_len.push_back(d.prompt_len[i]);
    response_len.push_back(static_cast<double>(len - d.prompt_len[i]));
    running += d.finished[i] == kDeferredRunning;
    stopped += d.finished[i] == kDeferredStop;
    at_length += d.finished[i] == kDeferredLength;
  }
  for (const auto step : d.token_policy_step) steps_behind.push_back(static_cast<double>(d.policy_step - step));
  ordered_json s;
  s["file"] = path;
  s["kind"] = "deferred";
  s["format"] = kDeferredFormat;
  s["version"] = kDeferredVersion;
  s["policy_step"] = d.policy_step;
  s["next_prompt"] = d.next_prompt;
  s["config"] = json_or_text(d.config);
  s["samples"] = static_cast<std::int64_t>(d.size());
  s["unfinished"] = running;
  s["finished_waiting_for_group"] = {{"stop", stopped}, {"length", at_length}};
  s["response_tokens"] = static_cast<std::int64_t>(d.response_tokens());
  s["prompt_length"] = distribution(prompt_len);
  s["response_length"] = distribution(response_len);
  // How far behind the writer's policy each carried token was sampled (0: this step).
  s["steps_behind"] = distribution(steps_behind);
  s["sample_ids"] = d.size() == 0 ? ordered_json(nullptr)
                                  : ordered_json{{"first", d.sample_id.front()}, {"last", d.sample_id.back()}};
  s["checksums"] = {{"verified", sums.verified.size()}, {"absent", sums.absent.size()}};
  return s;
}

}  // namespace braid::io::detail
