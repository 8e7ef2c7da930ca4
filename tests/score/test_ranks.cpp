// braid-score under mpirun: the inputs are cut into units (whole GRPO groups) and dealt
// so that the ranks' parts are disjoint, cover every input, and are about even.
#define BOOST_TEST_MODULE score_ranks
#include <boost/test/unit_test.hpp>

#include "score/ranks.hpp"

#include <set>

using namespace braid::score;

BOOST_AUTO_TEST_CASE(ppo_every_shard_is_a_unit) {
  const std::vector<std::vector<std::int64_t>> ids = {{0, 1}, {2, 3}, {4}};
  const auto units = score_units(ids, 0);
  BOOST_TEST_REQUIRE(units.size() == 3u);
  for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(units[i] == std::vector<std::size_t>{i}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(grpo_groups_that_straddle_shards_join_them) {
  // Groups of 3 in shards of 5 (as braid-generate writes them): 0-4, 5-9, 10-11 and a
  // shard 12-14 that shares no group with the others.
  const std::vector<std::vector<std::int64_t>> ids = {{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14}};
  const auto units = score_units(ids, 3);
  BOOST_TEST_REQUIRE(units.size() == 2u);
  BOOST_TEST(units[0] == (std::vector<std::size_t>{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(units[1] == (std::vector<std::size_t>{3}), boost::test_tools::per_element());
  // Out of order, and joined through a later shard.
  const std::vector<std::vector<std::int64_t>> shuffled = {{6, 7}, {0, 1}, {2, 3, 4}, {5}};
  const auto u2 = score_units(shuffled, 2);  // groups {0,1} {2,3} {4,5} {6,7}
  BOOST_TEST_REQUIRE(u2.size() == 3u);
  BOOST_TEST(u2[0] == (std::vector<std::size_t>{0}), boost::test_tools::per_element());
  BOOST_TEST(u2[1] == (std::vector<std::size_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(u2[2] == (std::vector<std::size_t>{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(units_are_dealt_whole_and_evenly) {
  const std::vector<std::vector<std::size_t>> units = {{0}, {1, 2}, {3}, {4}, {5}};
  const std::vector<std::int64_t> sequences = {8, 4, 4, 8, 8, 2};
  const auto owner = deal_units(units, sequences, 2);
  BOOST_TEST_REQUIRE(owner.size() == units.size());
  std::int64_t load[2] = {0, 0};
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i : units[u]) load[owner[u]] += sequences[i];
  BOOST_TEST(load[0] + load[1] == 34);
  BOOST_TEST(std::abs(load[0] - load[1]) <= 8);  // no more apart than the largest unit
  BOOST_TEST(owner[0] == 0);
  BOOST_TEST(owner[1] == 1);
  // One rank takes everything.
  for (int o : deal_units(units, sequences, 1)) BOOST_TEST(o == 0);
}
