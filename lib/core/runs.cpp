#include "core/runs.hpp"

namespace braid {

std::vector<std::size_t> greedy_runs(std::span<const std::int64_t> sizes, std::int64_t max_size,
                                     std::int64_t max_items) {
  std::vector<std::size_t> ends;
  std::size_t first = 0;  // first item of the open run
  std::int64_t size = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const bool full = size + sizes[i] > max_size || (max_items > 0 && static_cast<std::int64_t>(i - first) >= max_items);
    if (i > first && full) {
      ends.push_back(i);
      first = i;
      size = 0;
    }
    size += sizes[i];
  }
  if (sizes.size() > first) ends.push_back(sizes.size());
  return ends;
}

}  // namespace braid
