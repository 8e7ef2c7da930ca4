// The pieces of braid-generate's stage: which sample goes to which shard, what a
// rerun makes of a shard it finds, the migration decision and its messages.
#define BOOST_TEST_MODULE generate_stage_parts
#include <boost/test/unit_test.hpp>

#include "tests/common/scratch.hpp"
#include "core/error.hpp"
#include "generate/migrate.hpp"
#include "generate/shard_plan.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <vector>

using namespace braid::gen;

namespace {

Sample sample(std::uint64_t id, std::vector<std::int32_t> prompt, std::vector<std::int32_t> response) {
  Sample s{.sample_id = id, .prompt = std::move(prompt), .response = std::move(response)};
  for (std::size_t i = 0; i < s.response.size(); ++i) {
    s.raw_logprobs.push_back(-0.5f - static_cast<float>(id) - 0.01f * static_cast<float>(i));
    s.logprobs.push_back(-9.0f);  // the sampling policy's: not what the shard keeps
  }
  return s;
}

// 3 prompts x 2 samples, shards of 4: [0..3], [4, 5].
struct Fixture {
  std::filesystem::path dir = braid::test::scratch("plan");
  ShardPlan plan{.prompts = 3, .samples_per_prompt = 2, .shard_size = 4, .dir = dir, .prefix = "gen"};
  std::vector<Prompt> prompts;
  const std::string config = R"({"stage":"generate","samples_per_prompt":2,"shard_size":4,"seed":1,"prompts":"a.jsonl"})";
  Fixture() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (std::uint64_t i = 0; i < 6; ++i) prompts.push_back({.sample_id = i, .tokens = {256, static_cast<int>(i / 2)}});
  }
  void write(std::int64_t shard, const std::string& cfg, std::int64_t step = 3, std::int32_t first_token = -1) {
    std::vector<Sample> s;
    for (auto id = plan.first_sample(shard); id < plan.end_sample(shard); ++id) {
      auto p = prompts[static_cast<std::size_t>(id)].tokens;
      if (first_token >= 0) p[0] = first_token;
      s.push_back(sample(static_cast<std::uint64_t>(id), p, {7, 8}));
    }
    braid::io::write_sample_shard(plan.path(shard), shard_batch(s), {.policy_step = step, .config = cfg});
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(shards_are_fixed_blocks_of_sample_ids, Fixture) {
  BOOST_TEST(plan.samples() == 6);
  BOOST_TEST(plan.shards() == 2);
  BOOST_TEST(plan.size_of(0) == 4);
  BOOST_TEST(plan.size_of(1) == 2);
  BOOST_TEST(plan.shard_of(5) == 1);
  BOOST_TEST(plan.path(1).filename().string() == "gen-00001.h5");
}

BOOST_AUTO_TEST_CASE(a_shard_batch_is_in_sample_id_order_with_raw_logprobs_on_the_response) {
  const std::vector<Sample> finished{sample(5, {256, 1}, {4, 5, 6}), sample(4, {256}, {9})};
  const auto b = shard_batch(finished);
  BOOST_TEST(b.sample_id == (std::vector<std::int64_t>{4, 5}), boost::test_tools::per_element());
  BOOST_TEST(b.prompt_len == (std::vector<std::int32_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(b.tokens == (std::vector<std::int32_t>{256, 9, 256, 1, 4, 5, 6}), boost::test_tools::per_element());
  const std::vector<float> lp{0, -4.5f, 0, 0, -5.5f, -5.51f, -5.52f};
  BOOST_TEST(*b.logprobs_actor == lp, boost::test_tools::per_element());
  BOOST_TEST(b.problems().empty());
}

BOOST_FIXTURE_TEST_CASE(a_rerun_tells_complete_missing_and_stale_shards_apart, Fixture) {
  std::string why;
  BOOST_TEST((check_existing_shard(plan, 0, prompts, config, 3, &why) == ShardState::missing));
  write(0, config);
  BOOST_TEST((check_existing_shard(plan, 0, prompts, config, 3, &why) == ShardState::complete));
  // Another prompt file name or limit does not change the samples.
  const std::string renamed = R"({"stage":"generate","samples_per_prompt":2,"shard_size":4,"seed":1,"prompts":"b.jsonl"})";
  BOOST_TEST((check_existing_shard(plan, 0, prompts, renamed, 3, &why) == ShardState::complete));
  // A shard that holds other ids than this run puts there (a --limit grew the last one).
  write(1, config);
  ShardPlan more = plan;
  more.prompts = 4;
  std::vector<Prompt> more_prompts = prompts;
  more_prompts.push_back({.sample_id = 6, .tokens = {256, 3}});
  more_prompts.push_back({.sample_id = 7, .tokens = {256, 3}});
  BOOST_TEST((check_existing_shard(more, 1, more_prompts, config, 3, &why) == ShardState::stale));
  // A file that is not a finished shard is regenerated, with the reason.
  std::ofstream(plan.path(1), std::ios::trunc) << "not hdf5";
  why.clear();
  BOOST_TEST((check_existing_shard(plan, 1, prompts, config, 3, &why) == ShardState::missing));
  BOOST_TEST(!why.empty());
}

BOOST_FIXTURE_TEST_CASE(a_shard_of_another_run_is_refused_by_name, Fixture) {
  write(0, config);
  const std::string other_seed = R"({"stage":"generate","samples_per_prompt":2,"shard_size":4,"seed":2})";
  try {
    check_existing_shard(plan, 0, prompts, other_seed, 3, nullptr);
    BOOST_FAIL("another seed was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(std::string(e.what()).find("seed 1 there, 2 here") != std::string::npos);
    BOOST_TEST(e.file() == plan.path(0).string());
  }
  BOOST_CHECK_THROW(check_existing_shard(plan, 0, prompts, config, 4, nullptr), braid::InputError);  // policy step
  write(1, config, 3, /*first_token=*/5);
  BOOST_CHECK_THROW(check_existing_shard(plan, 1, prompts, config, 3, nullptr), braid::InputError);  // prompts
}

BOOST_AUTO_TEST_CASE(the_threshold_is_a_count_or_a_fraction) {
  BOOST_TEST(parse_migrate_threshold("", 50) == 0.0);
  BOOST_TEST(parse_migrate_threshold("12", 50) == 12.0);
  BOOST_TEST(parse_migrate_threshold("0.2", 50) == 10.0);
  BOOST_TEST(parse_migrate_threshold("1.0", 50) == 50.0);
  for (const char* bad : {"1.5", "-3", "abc", "2.5", "7x"}) {
    BOOST_CHECK_THROW(parse_migrate_threshold(bad, 50), braid::UsageError);
  }
}

BOOST_AUTO_TEST_CASE(migration_starts_below_the_threshold_and_keeps_the_fullest_ranks) {
  const std::vector<std::int64_t> left{3, 5, 0, 5};
  auto d = decide_migration(left, 14, 2);
  BOOST_TEST(d.now);
  BOOST_TEST(d.remaining == 13);
  BOOST_TEST(d.receivers == (std::vector<int>{1, 3}), boost::test_tools::per_element());  // most left; ties: lower rank
  BOOST_TEST(!decide_migration(left, 13, 2).now);                                           // not fewer than R_t
  BOOST_TEST(!decide_migration(std::vector<std::int64_t>{0, 0}, 5, 1).now);                 // all done
  BOOST_TEST(!decide_migration(left, 14, 4).now);                                           // nobody to free
  BOOST_TEST(!decide_migration(left, 0, 1).now);                                            // off
}

BOOST_AUTO_TEST_CASE(a_handover_survives_its_message) {
  Handover h{.shards = {3, 9}};
  h.finished.push_back(sample(12, {256, 4}, {1, 2, 3}));
  h.finished.back().finish = FinishReason::stop;
  h.unfinished.push_back({.sample_id = 13, .tokens = {256}, .response = {5}, .logprobs = {-1}, .raw_logprobs = {-2}});
  h.unfinished.push_back({.sample_id = 14, .tokens = {256, 8}});
  const Handover back = unpack(pack(h));
  BOOST_TEST(back.shards == h.shards, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(back.finished.size() == 1u);
  BOOST_TEST(back.finished[0].sample_id == 12u);
  BOOST_TEST(back.finished[0].response == h.finished[0].response, boost::test_tools::per_element());
  BOOST_TEST(back.finished[0].raw_logprobs == h.finished[0].raw_logprobs, boost::test_tools::per_element());
  BOOST_TEST((back.finished[0].finish == FinishReason::stop));
  BOOST_TEST_REQUIRE(back.unfinished.size() == 2u);
  BOOST_TEST(back.unfinished[0].response == h.unfinished[0].response, boost::test_tools::per_element());
  BOOST_TEST(back.unfinished[0].raw_logprobs == h.unfinished[0].raw_logprobs, boost::test_tools::per_element());
  BOOST_TEST(back.unfinished[1].tokens == h.unfinished[1].tokens, boost::test_tools::per_element());
  std::string cut = pack(h);
  cut.pop_back();
  BOOST_CHECK_THROW(unpack(cut), std::runtime_error);
}

// With the prompt lines' extra fields: a shard keeps them, and a rerun whose prompt file
// gives a prompt other extra fields refuses the shard (a changed answer is another run).
BOOST_FIXTURE_TEST_CASE(a_rerun_checks_the_extra_fields_too, Fixture) {
  std::vector<braid::io::PromptOrigin> origins;
  for (int i = 0; i < 6; ++i) origins.push_back({.line = 1 + i / 2, .extra = fmt::format(R"({{"answer": {}}})", i / 2)});
  std::vector<Sample> s;
  for (std::uint64_t id = 0; id < 4; ++id) s.push_back(sample(id, prompts[id].tokens, {7}));
  const auto b = shard_batch(s, origins);
  BOOST_TEST_REQUIRE(b.origin.has_value());
  BOOST_TEST((*b.origin)[3].line == 2);
  BOOST_TEST((*b.origin)[3].extra == R"({"answer": 1})");
  braid::io::write_sample_shard(plan.path(0), b, {.policy_step = 3, .config = config});

  std::string why;
  BOOST_TEST((check_existing_shard(plan, 0, prompts, config, 3, &why, origins) == ShardState::complete));
  auto moved = origins;  // a blank line added above: other line numbers, the same fields
  for (auto& o : moved) o.line += 1;
  BOOST_TEST((check_existing_shard(plan, 0, prompts, config, 3, &why, moved) == ShardState::complete));
  auto changed = origins;
  changed[2].extra = R"({"answer": 5})";
  try {
    check_existing_shard(plan, 0, prompts, config, 3, nullptr, changed);
    BOOST_ERROR("a shard with other extra fields was taken as complete");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.field() == "sample 2");
    BOOST_TEST(std::string(e.what()).find("other extra fields") != std::string::npos);
  }
  // A shard written without origins is regenerated.
  write(0, config);
  BOOST_TEST((check_existing_shard(plan, 0, prompts, config, 3, &why, origins) == ShardState::stale));
  BOOST_TEST(why.find("no prompt origins") != std::string::npos);
}
