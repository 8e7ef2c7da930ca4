// The order in which a run takes its prompts: a stream of positions 0, 1, 2, ... over
// a file of n prompt lines, epoch after epoch. Position p lies in epoch e = p / n and
// takes line perm_e[p mod n], where perm_e is the identity (file order) or, shuffled, a
// permutation drawn from Rng(seed, e) — the same on every machine. So within an epoch
// every line is taken exactly once, whatever how many positions an iteration takes, and
// a run that knows its position resumes where it stopped.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace braid::data {

class EpochOrder {
 public:
  // std::invalid_argument when lines < 1.
  EpochOrder(std::int64_t lines, bool shuffle, std::uint64_t seed);

  std::int64_t lines() const { return lines_; }
  std::int64_t epoch_of(std::int64_t position) const { return position / lines_; }
  // The 0-based line the position takes (std::invalid_argument for a negative position).
  std::int64_t line_at(std::int64_t position);
  // Lines of positions [first, first + count), in order.
  std::vector<std::int64_t> lines_at(std::int64_t first, std::int64_t count);

 private:
  const std::vector<std::int64_t>& permutation(std::int64_t epoch);

  std::int64_t lines_;
  bool shuffle_;
  std::uint64_t seed_;
  std::map<std::int64_t, std::vector<std::int64_t>> perms_;  // by epoch, made when first asked
};

}  // namespace braid::data
