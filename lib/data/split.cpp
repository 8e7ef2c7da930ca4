#include "data/split.hpp"

#include "core/rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <stdexcept>

namespace braid::data {
namespace {

constexpr std::uint64_t kSplitStream = 0x5350'4c49'54ull;  // "SPLIT": apart from the epochs' streams

}  // namespace

std::int64_t HeldOut::of(std::int64_t lines) const {
  const std::int64_t n = count > 0 ? count : std::max<std::int64_t>(1, std::llround(fraction * double(lines)));
  if (n >= lines) {
    throw std::invalid_argument(fmt::format("holding out {} of {} lines leaves none to train on", n, lines));
  }
  return n;
}

Split split_lines(std::int64_t lines, const HeldOut& heldout, std::uint64_t seed) {
  Split s;
  std::vector<std::int64_t> all(static_cast<std::size_t>(lines));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  if (!heldout.any()) {
    s.train = all;
    return s;
  }
  const std::int64_t n = heldout.of(lines);
  std::vector<std::int64_t> perm = all;
  Rng(seed, kSplitStream).shuffle(std::span<std::int64_t>(perm));
  s.heldout.assign(perm.begin(), perm.begin() + n);
  std::sort(s.heldout.begin(), s.heldout.end());
  std::set_difference(all.begin(), all.end(), s.heldout.begin(), s.heldout.end(), std::back_inserter(s.train));
  return s;
}

}  // namespace braid::data
