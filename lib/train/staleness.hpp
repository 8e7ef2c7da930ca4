// How stale the tokens braid-train learns from are: for each response token, the
// actor's step minus the policy step that sampled it (the shard's per-token
// /policy_step, else its meta.policy_step). 0 is on-policy; the one-step asynchronous
// run trains on 1; a sample deferred by overcommit holds tokens of several steps.
// The policy loss compares each token with the logprob its own sampling policy gave it
// (/logprobs/actor is per token), so mixed-policy samples are weighted correctly;
// --max-staleness bounds how far off-policy that may go.
#pragma once

#include "core/json.hpp"
#include "io/sample_batch.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace braid::train {

struct Staleness {
  std::int64_t tokens = 0;        // response tokens counted
  std::int64_t stale_tokens = 0;  // of those, sampled by an older policy than the actor's
  std::int64_t max = 0;           // the largest staleness (steps)
  double sum = 0;

  void add(const Staleness& o);
  ordered_json to_json() const;   // {"max", "mean", "stale_tokens", "tokens"}
};

// Gives a batch read from a shard without /policy_step its per-token steps: every
// response token from `meta_step` (the shard's meta.policy_step).
void fill_policy_steps(io::SampleBatch& b, std::int64_t meta_step);

// The staleness of sequences [from, b.size()) against an actor at `actor_step`. With
// max_staleness set, a token staler than that (or from a step after the actor's) is an
// InputError naming `file` and /policy_step.
Staleness measure_staleness(const io::SampleBatch& b, std::size_t from, std::int64_t actor_step,
                            std::optional<std::int64_t> max_staleness, const std::string& file);

}  // namespace braid::train
