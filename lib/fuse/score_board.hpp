// Who scores which shard in a fused rollout: a board kept by rank 0.
//
// Every shard is reported to the board once, by the rank that wrote it (or found it
// complete on disk); a rank that is free to score asks the board for a shard and is
// given one reported shard, or, once every rank has finished generating and no shard
// is left, told that the work is over. So each shard is scored exactly once, by the
// first rank free for it, whoever generated it. The board is pure bookkeeping; the
// messages that feed it are fused_rollout.cpp's.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace braid::fuse {

class ScoreBoard {
 public:
  explicit ScoreBoard(int ranks) : ranks_(ranks) {}

  void reported(std::int64_t shard) {
    ready_.push_back(shard);
    ++reported_total_;
  }
  void generation_done() { ++generation_done_; }
  // A rank asks for work (rank 0 asks through take() instead). `ahead`: it asks for its
  // next shard while it still scores one (so the answer is there when it is done).
  void asked(int rank, bool ahead = false) { waiting_.push_back({rank, ahead}); }

  struct Answer {
    int rank;
    std::optional<std::int64_t> shard;  // none: no more work
  };
  // The answers due now: shards to the ranks that asked, in the order they asked, then
  // "no more" to the rest once everything is given out. While rank 0 is free to score
  // (`board_free`), the last shard left goes to it rather than to a rank asking ahead,
  // which would only start it after the one it holds.
  std::vector<Answer> answers(bool board_free = false);
  // A shard for rank 0 itself, when one is left after the others were served.
  std::optional<std::int64_t> take();

  // Every shard given out and every other rank told so.
  bool over() const { return all_given() && released_ == ranks_ - 1; }
  bool all_given() const { return generation_done_ == ranks_ && ready_.empty(); }
  std::int64_t shards_reported() const { return reported_total_; }

 private:
  int ranks_;
  int generation_done_ = 0;
  int released_ = 0;
  std::int64_t reported_total_ = 0;
  std::deque<std::int64_t> ready_;
  struct Ask {
    int rank;
    bool ahead;
  };
  std::deque<Ask> waiting_;
};

}  // namespace braid::fuse
