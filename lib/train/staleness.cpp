#include "train/staleness.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace braid::train {

void Staleness::add(const Staleness& o) {
  tokens += o.tokens;
  stale_tokens += o.stale_tokens;
  max = std::max(max, o.max);
  sum += o.sum;
}

ordered_json Staleness::to_json() const {
  return ordered_json{{"max", max},
                      {"mean", tokens > 0 ? sum / static_cast<double>(tokens) : 0.0},
                      {"stale_tokens", stale_tokens},
                      {"tokens", tokens}};
}

void fill_policy_steps(io::SampleBatch& b, std::int64_t meta_step) {
  if (b.policy_step) return;
  auto& steps = b.policy_step.emplace(b.token_count(), 0);
  for (std::size_t i = 0; i < b.size(); ++i) {
    std::fill(steps.begin() + static_cast<std::ptrdiff_t>(b.response_begin(i)),
              steps.begin() + static_cast<std::ptrdiff_t>(b.end(i)), meta_step);
  }
}

Staleness measure_staleness(const io::SampleBatch& b, std::size_t from, std::int64_t actor_step,
                            std::optional<std::int64_t> max_staleness, const std::string& file) {
  if (!b.policy_step) throw std::logic_error("measure_staleness: the batch has no policy steps");
  Staleness s;
  for (std::size_t i = from; i < b.size(); ++i) {
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
      const std::int64_t lag = actor_step - (*b.policy_step)[t];
      if (max_staleness && (lag < 0 || lag > *max_staleness)) {
        throw InputError(file, "/policy_step",
                         fmt::format("sample {} has a token of policy step {}, {} the actor's step {} (--max-staleness "
                                     "{}): {}",
                                     b.sample_id[i], (*b.policy_step)[t], lag < 0 ? "after" : "too far behind",
                                     actor_step, *max_staleness,
                                     lag < 0 ? "samples of a later policy than the one being trained"
                                             : "generation ran with weights staler than allowed"));
      }
      ++s.tokens;
      s.stale_tokens += lag > 0 ? 1 : 0;
      s.max = std::max(s.max, lag);
      s.sum += static_cast<double>(lag);
    }
  }
  return s;
}

}  // namespace braid::train
