// A held-out split of a prompt file: `heldout` lines drawn by a seeded permutation
// (Rng(seed, kSplitStream)) are set aside for evaluation, the others train; each part
// keeps the file's order. The same file, count and seed give the same split anywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::data {

// How many lines to hold out: a count, or a fraction of the file (rounded, at least 1).
struct HeldOut {
  std::int64_t count = 0;
  double fraction = 0;
  bool any() const { return count > 0 || fraction > 0; }
  // The count for a file of `lines`; std::invalid_argument when it leaves no line to train on.
  std::int64_t of(std::int64_t lines) const;
};

struct Split {
  std::vector<std::int64_t> train, heldout;  // 0-based line indices, in file order
};

Split split_lines(std::int64_t lines, const HeldOut& heldout, std::uint64_t seed);

}  // namespace braid::data
