#include "fuse/score_board.hpp"

#include <algorithm>

namespace braid::fuse {

std::vector<ScoreBoard::Answer> ScoreBoard::answers(bool board_free) {
  std::vector<Answer> out;
  for (auto it = waiting_.begin(); it != waiting_.end() && !ready_.empty();) {
    if (it->ahead && board_free && ready_.size() == 1) {
      ++it;
      continue;
    }
    out.push_back({it->rank, ready_.front()});
    ready_.pop_front();
    it = waiting_.erase(it);
  }
  if (all_given()) {
    while (!waiting_.empty()) {
      out.push_back({waiting_.front().rank, std::nullopt});
      waiting_.pop_front();
      ++released_;
    }
  }
  return out;
}

std::optional<std::int64_t> ScoreBoard::take() {
  const bool someone_waits = std::any_of(waiting_.begin(), waiting_.end(), [](const Ask& a) { return !a.ahead; });
  if (someone_waits || ready_.empty()) return std::nullopt;
  const std::int64_t shard = ready_.front();
  ready_.pop_front();
  return shard;
}

}  // namespace braid::fuse
