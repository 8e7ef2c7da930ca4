#include "fuse/score_board.hpp"

namespace braid::fuse {

std::vector<ScoreBoard::Answer> ScoreBoard::answers() {
  std::vector<Answer> out;
  while (!waiting_.empty() && !ready_.empty()) {
    out.push_back({waiting_.front(), ready_.front()});
    waiting_.pop_front();
    ready_.pop_front();
  }
  if (all_given()) {
    while (!waiting_.empty()) {
      out.push_back({waiting_.front(), std::nullopt});
      waiting_.pop_front();
      ++released_;
    }
  }
  return out;
}

std::optional<std::int64_t> ScoreBoard::take() {
  if (!waiting_.empty() || ready_.empty()) return std::nullopt;
  const std::int64_t shard = ready_.front();
  ready_.pop_front();
  return shard;
}

}  // namespace braid::fuse
