// The fused rollout's board: every reported shard is given out exactly once, in the
// order ranks asked, and "no more" comes only when every rank has finished generating
// and nothing is left.
#define BOOST_TEST_MODULE fuse_score_board
#include <boost/test/unit_test.hpp>

#include "fuse/score_board.hpp"

#include <map>
#include <set>

using braid::fuse::ScoreBoard;

BOOST_AUTO_TEST_CASE(shards_go_to_the_ranks_that_ask_in_order) {
  ScoreBoard board(3);
  board.reported(4);
  board.asked(2);
  board.asked(1);
  auto a = board.answers();
  BOOST_TEST_REQUIRE(a.size() == 1u);  // one shard, the first to ask gets it
  BOOST_TEST(a[0].rank == 2);
  BOOST_TEST(a[0].shard.value_or(-1) == 4);
  BOOST_TEST(board.answers().empty());  // rank 1 waits: generation is still going on
  board.reported(7);
  a = board.answers();
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(a[0].rank == 1);
  BOOST_TEST(a[0].shard.value_or(-1) == 7);
  BOOST_TEST(!board.take());  // nothing left for rank 0
  BOOST_TEST(!board.all_given());
}

BOOST_AUTO_TEST_CASE(rank_zero_takes_what_the_others_leave) {
  ScoreBoard board(2);
  board.reported(0);
  board.reported(1);
  board.asked(1);
  BOOST_TEST(!board.take());  // rank 1 asked first: served by answers()
  const auto a = board.answers();
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(a[0].shard.value_or(-1) == 0);
  BOOST_TEST(board.take().value_or(-1) == 1);
  BOOST_TEST(!board.take());
}

BOOST_AUTO_TEST_CASE(no_more_only_after_every_rank_finished_generating) {
  ScoreBoard board(3);
  board.asked(1);
  board.asked(2);
  board.generation_done();
  board.generation_done();
  BOOST_TEST(board.answers().empty());  // one rank still generates: its shards may come
  board.reported(9);
  board.generation_done();
  auto a = board.answers();
  BOOST_TEST_REQUIRE(a.size() == 2u);
  BOOST_TEST(a[0].rank == 1);
  BOOST_TEST(a[0].shard.value_or(-1) == 9);
  BOOST_TEST(a[1].rank == 2);
  BOOST_TEST(!a[1].shard);  // the last shard is given: rank 2 is released
  BOOST_TEST(!board.over());  // rank 1 has not been released yet
  board.asked(1);
  a = board.answers();
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(!a[0].shard);
  BOOST_TEST(board.over());
}

// Many ranks asking and reporting in an interleaved order: each shard given once.
BOOST_AUTO_TEST_CASE(every_shard_is_given_exactly_once) {
  constexpr int kRanks = 4;
  constexpr int kShards = 40;
  ScoreBoard board(kRanks);
  std::map<std::int64_t, int> given;
  int next = 0;
  std::set<int> released;
  auto collect = [&] {
    for (const auto& a : board.answers()) {
      if (a.shard) {
        BOOST_TEST(given.count(*a.shard) == 0u);
        given[*a.shard] = a.rank;
        board.asked(a.rank);  // it comes back for more
      } else {
        released.insert(a.rank);
      }
    }
    while (auto k = board.take()) given[*k] = 0;
  };
  for (int r = 1; r < kRanks; ++r) board.asked(r);
  for (int step = 0; step < kShards; ++step) {
    board.reported(next++);
    if (step % 13 == 12) board.generation_done();
    collect();
  }
  board.generation_done();
  collect();
  BOOST_TEST(given.size() == static_cast<std::size_t>(kShards));
  BOOST_TEST(released.size() == static_cast<std::size_t>(kRanks - 1));
  BOOST_TEST(board.over());
  BOOST_TEST(board.shards_reported() == kShards);
}

// A rank asking ahead (while it still scores a shard) does not take the last shard from
// a free rank 0; while rank 0 generates, or with more shards left, it is served.
BOOST_AUTO_TEST_CASE(the_last_shard_goes_to_a_free_rank_not_one_asking_ahead) {
  ScoreBoard board(2);
  board.reported(0);
  board.reported(1);
  board.asked(1, /*ahead=*/true);
  auto a = board.answers(/*board_free=*/true);  // two left: one for each
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(a[0].shard.value_or(-1) == 0);
  board.asked(1, true);
  BOOST_TEST(board.answers(true).empty());  // the last one waits for rank 0
  BOOST_TEST(board.take().value_or(-1) == 1);
  board.reported(2);
  a = board.answers(/*board_free=*/false);  // rank 0 busy generating: served
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(a[0].shard.value_or(-1) == 2);
  board.generation_done();
  board.generation_done();
  board.asked(1, false);
  a = board.answers(true);
  BOOST_TEST_REQUIRE(a.size() == 1u);
  BOOST_TEST(!a[0].shard);
  BOOST_TEST(board.over());
}
