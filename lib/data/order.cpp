#include "data/order.hpp"

#include "core/rng.hpp"

#include <fmt/format.h>

#include <numeric>
#include <span>
#include <stdexcept>

namespace braid::data {

EpochOrder::EpochOrder(std::int64_t lines, bool shuffle, std::uint64_t seed)
    : lines_(lines), shuffle_(shuffle), seed_(seed) {
  if (lines < 1) throw std::invalid_argument("EpochOrder: a dataset needs at least one line");
}

const std::vector<std::int64_t>& EpochOrder::permutation(std::int64_t epoch) {
  auto it = perms_.find(epoch);
  if (it != perms_.end()) return it->second;
  std::vector<std::int64_t> perm(static_cast<std::size_t>(lines_));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  if (shuffle_) Rng(seed_, static_cast<std::uint64_t>(epoch)).shuffle(std::span<std::int64_t>(perm));
  return perms_.emplace(epoch, std::move(perm)).first->second;
}

std::int64_t EpochOrder::line_at(std::int64_t position) {
  if (position < 0) throw std::invalid_argument(fmt::format("EpochOrder: position {} is negative", position));
  return permutation(epoch_of(position))[static_cast<std::size_t>(position % lines_)];
}

std::vector<std::int64_t> EpochOrder::lines_at(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  for (std::int64_t p = first; p < first + count; ++p) out.push_back(line_at(p));
  return out;
}

}  // namespace braid::data
