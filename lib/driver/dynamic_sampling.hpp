// DAPO's dynamic sampling, braid run's half (Yu et al. 2025, §3.2; the run file's
// data.dynamic_sampling): an iteration's rollout takes a batch of B prompts from the
// stream; while fewer than B of the iteration's groups have rewards that are not all
// equal, and fewer than max_rounds rollouts ran, another rollout takes the next B prompts
// ("round" r, its shards gen-rR-* and scored-rR-* beside the first's). braid-train then
// drops the groups of equal rewards and keeps the first B (train/group_filter.hpp).
//
// The stream position of iteration i + 1 depends on the rounds iteration i needed, so
// each iteration records its own in OUT/iter-i/data.json ({"first_prompt", "rounds",
// "next_prompt", "groups", "kept"}); a run resumed reads it, so it takes the prompts it
// took the first time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/json.hpp"
#include "driver/layout.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

bool dynamic_sampling(const RunSpec& spec);
// Where iteration i's first round starts: 0, or iteration i − 1's data.json next_prompt
// (nullopt while that iteration has not rolled out).
std::optional<std::int64_t> dynamic_first_prompt(const Layout& layout, int iteration);
// OUT/iter-i/data.json.
std::filesystem::path dynamic_record(const Layout& layout, int iteration);

// Groups of iteration i's scored shards (every round's) and those whose rewards are not all equal.
struct RoundCount {
  std::int64_t groups = 0, kept = 0;
};
RoundCount count_groups(const Layout& layout, int iteration);

// Rounds of iteration i whose scoring is done (their score stats files there).
int rounds_done(const RunSpec& spec, const Layout& layout, int iteration);

// Writes iteration i's data.json when it would change; returns it.
ordered_json record_rounds(const RunSpec& spec, const Layout& layout, int iteration);

}  // namespace braid::driver
