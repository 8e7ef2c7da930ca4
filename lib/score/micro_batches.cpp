#include "score/micro_batches.hpp"

#include <stdexcept>

namespace braid::score {

std::vector<MicroBatch> pack_micro_batches(std::span<const std::int64_t> offsets, std::int64_t micro_tokens) {
  if (micro_tokens <= 0) throw std::invalid_argument("pack_micro_batches: micro_tokens must be positive");
  std::vector<MicroBatch> out;
  MicroBatch cur;
  for (std::size_t s = 0; s + 1 < offsets.size(); ++s) {
    const std::int64_t len = offsets[s + 1] - offsets[s];
    if (len <= 0) continue;
    if (!cur.sequences.empty() && cur.tokens + len > micro_tokens) {
      out.push_back(std::move(cur));
      cur = {};
    }
    cur.sequences.push_back(s);
    cur.tokens += len;
  }
  if (!cur.sequences.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace braid::score
