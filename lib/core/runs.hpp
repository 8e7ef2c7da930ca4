// Cutting items of given sizes, in their order, into consecutive runs under a size limit:
// the one greedy packer of sequences into micro-batches (lib/data's packers of scoring and
// training, lib/rl's reference pass).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace braid {

// Greedy in the given order: items of the given sizes cut into consecutive runs of at
// most max_size in all and (when max_items > 0) at most max_items items; an item larger
// than max_size alone gets a run of its own. The end of each run, in order.
std::vector<std::size_t> greedy_runs(std::span<const std::int64_t> sizes, std::int64_t max_size,
                                     std::int64_t max_items = 0);

}  // namespace braid
