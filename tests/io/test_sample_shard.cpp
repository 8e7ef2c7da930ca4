#define BOOST_TEST_MODULE sample_shard
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/h5.hpp"
#include "io/sample_shard.hpp"
#include "io/shard_header.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/scratch.hpp"

using namespace braid;
using namespace braid::io;
using braid::test::scratch;

namespace {

// A batch of n random sequences with every optional array filled with distinct values.
SampleBatch random_batch(std::size_t n, bool scored, std::uint64_t seed) {
  Rng rng(seed);
  SampleBatch b;
  if (scored) {
    b.reward.emplace();
    for (const auto& f : token_array_fields()) (b.*f.member).emplace();
  } else {
    b.logprobs_actor.emplace();
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto prompt = static_cast<std::int32_t>(rng.between(1, 20));   // a prompt holds at least one token
    const auto len = static_cast<std::size_t>(prompt + rng.between(0, 40));
    std::vector<std::int32_t> seq(len);
    for (auto& t : seq) t = static_cast<std::int32_t>(rng.below(259));
    b.add(seq, prompt, static_cast<std::int64_t>(1000 + i));
  }
  if (b.reward) {
    for (auto& r : *b.reward) r = static_cast<float>(rng.normal());
  }
  for (const auto& f : token_array_fields()) {
    if (auto& arr = b.*f.member) {
      for (auto& v : *arr) v = static_cast<float>(rng.normal());
    }
  }
  return b;
}

void require_equal(const SampleBatch& a, const SampleBatch& b) {
  BOOST_TEST(a.tokens == b.tokens, boost::test_tools::per_element());
  BOOST_TEST(a.offsets == b.offsets, boost::test_tools::per_element());
  BOOST_TEST(a.prompt_len == b.prompt_len, boost::test_tools::per_element());
  BOOST_TEST(a.sample_id == b.sample_id, boost::test_tools::per_element());
  BOOST_TEST(a.reward.has_value() == b.reward.has_value());
  if (a.reward && b.reward) BOOST_TEST(*a.reward == *b.reward, boost::test_tools::per_element());
  for (const auto& f : token_array_fields()) {
    const auto& x = a.*f.member;
    const auto& y = b.*f.member;
    BOOST_TEST_INFO("per-token array " << f.path);
    BOOST_TEST(x.has_value() == y.has_value());
    if (x && y) BOOST_TEST(*x == *y, boost::test_tools::per_element());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(generated_shard_round_trips) {
  const auto batch = random_batch(50, false, 1);
  const auto path = scratch("generated.h5");
  write_sample_shard(path, batch, {.policy_step = 12, .created_by = "braid-generate --n 50", .config = R"({"a": 1})"});
  const auto shard = read_sample_shard(path);
  require_equal(shard.batch, batch);
  BOOST_TEST(shard.meta.policy_step == 12);
  BOOST_TEST(shard.meta.created_by == "braid-generate --n 50");
  BOOST_TEST(shard.meta.config == R"({"a": 1})");
}

BOOST_AUTO_TEST_CASE(scored_shard_round_trips_with_every_array) {
  const auto batch = random_batch(80, true, 2);
  const auto path = scratch("scored.h5");
  write_sample_shard(path, batch, {});
  require_equal(read_sample_shard(path).batch, batch);
  const auto info = probe_sample_shard(path);
  BOOST_TEST(info.sequences == 80);
  BOOST_TEST(info.tokens == static_cast<std::int64_t>(batch.token_count()));
  BOOST_TEST(info.has_reward);
  BOOST_TEST(info.token_arrays.size() == token_array_fields().size());
  BOOST_TEST(info.other_datasets.empty());
}

BOOST_AUTO_TEST_CASE(score_reads_adds_and_writes_a_new_shard) {
  const auto gen = scratch("gen.h5"), scored = scratch("gen.scored.h5");
  write_sample_shard(gen, random_batch(10, false, 3), {.policy_step = 4});
  auto s = read_sample_shard(gen);
  s.batch.values = std::vector<float>(s.batch.token_count(), 0.25f);
  s.batch.reward = std::vector<float>(s.batch.size(), 1.0f);
  write_sample_shard(scored, s.batch, s.meta);
  const auto back = read_sample_shard(scored);
  require_equal(back.batch, s.batch);
  BOOST_TEST(back.meta.policy_step == 4);
  BOOST_TEST(!read_sample_shard(gen).batch.values.has_value());
}

BOOST_AUTO_TEST_CASE(empty_shard_and_empty_sequences_round_trip) {
  SampleBatch empty;
  empty.logprobs_actor.emplace();
  write_sample_shard(scratch("empty.h5"), empty, {});
  require_equal(read_sample_shard(scratch("empty.h5")).batch, empty);

  SampleBatch holes;
  holes.add(std::vector<std::int32_t>{5, 6, 7}, 3, 2);  // a prompt with no response
  write_sample_shard(scratch("holes.h5"), holes, {});
  const auto back = read_sample_shard(scratch("holes.h5")).batch;
  require_equal(back, holes);
  BOOST_TEST(back.response(0).empty());
  BOOST_TEST(back.prompt(0).size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_sequence_without_a_prompt_token_is_refused) {
  // A response token's logprob is conditioned on the tokens before it: no sample starts
  // without one (generation refuses an empty prompt), so a shard holding one is damaged.
  SampleBatch b;
  b.add(std::vector<std::int32_t>{5, 6, 7}, 0, 1);
  BOOST_TEST(b.problems().size() == 1u);
  BOOST_CHECK_THROW(write_sample_shard(scratch("no_prompt.h5"), b, {}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(large_config_attribute_round_trips) {
  SampleShardMeta meta;
  meta.config = '"' + std::string(199998, 'x') + '"';  // JSON text over HDF5's 64 KiB compact-attribute limit
  write_sample_shard(scratch("bigconfig.h5"), random_batch(2, false, 4), meta);
  BOOST_TEST(read_sample_shard(scratch("bigconfig.h5")).meta.config.size() == 200000u);
}

BOOST_AUTO_TEST_CASE(sequence_views_follow_offsets_and_prompt_len) {
  SampleBatch b;
  b.logprobs_actor.emplace();
  b.add(std::vector<std::int32_t>{1, 2, 3, 4}, 1, 10);
  b.add(std::vector<std::int32_t>{5, 6}, 2, 11);
  (*b.logprobs_actor)[2] = -0.5f;
  BOOST_TEST(b.size() == 2u);
  BOOST_TEST(b.offsets == (std::vector<std::int64_t>{0, 4, 6}), boost::test_tools::per_element());
  BOOST_TEST(b.response(0).size() == 3u);
  BOOST_TEST(b.response(0)[0] == 2);
  BOOST_TEST(b.sequence(1)[1] == 6);
  BOOST_TEST(b.response_of(*b.logprobs_actor, 0)[1] == -0.5f);
  BOOST_TEST(b.logprobs_actor->size() == 6u);
}

BOOST_AUTO_TEST_CASE(batch_problems_name_each_broken_invariant) {
  SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3}, 1, 0);
  b.add(std::vector<std::int32_t>{4, 5}, 1, 1);
  BOOST_TEST(b.problems().empty());

  auto bad = b;
  bad.prompt_len[1] = 3;
  bad.values = std::vector<float>(4);
  bad.reward = std::vector<float>(1);
  bad.offsets[1] = 6;  // beyond offsets[2] = 5: decreasing
  const auto problems = bad.problems();
  auto mentions = [&](const std::string& s) {
    return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(s) != std::string::npos; });
  };
  BOOST_TEST(mentions("/offsets: decreases"));
  BOOST_TEST(mentions("/values: has 4 entries, expected 5"));
  BOOST_TEST(mentions("/reward: has 1 entries, expected 2"));
  BOOST_TEST(problems.size() >= 3u);
  BOOST_CHECK_THROW(write_sample_shard(scratch("never.h5"), bad, {}), std::invalid_argument);
  BOOST_TEST(!std::filesystem::exists(scratch("never.h5")));

  auto long_prompt = b;
  long_prompt.prompt_len[0] = 4;
  BOOST_TEST(long_prompt.problems().size() == 1u);
  BOOST_TEST(long_prompt.problems()[0].find("/prompt_len") == 0u);
}

BOOST_AUTO_TEST_CASE(reading_a_weight_shard_as_samples_names_the_format) {
  const auto path = scratch("weights_not_samples.h5");
  {
    WeightShardWriter w(path, WeightShardMeta{});
    w.add("model.norm.weight", {2}, std::vector<float>{1, 2});
    w.commit();
  }
  try {
    read_sample_shard(path);
    BOOST_FAIL("a weight shard was read as samples");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(path.string()) != std::string::npos);
    BOOST_TEST(msg.find("\"braid.weights\", expected \"braid.samples\"") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_named) {
  try {
    read_sample_shard(scratch("does-not-exist.h5"));
    BOOST_FAIL("a missing file was read");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("does-not-exist.h5: no such file") != std::string::npos);
  }
}

// Two sequences under one sample_id would be scored and trained as one: refused naming
// the dataset and both sequences.
BOOST_AUTO_TEST_CASE(duplicate_sample_ids_are_refused) {
  SampleBatch b = random_batch(3, false, 5);
  b.sample_id[2] = b.sample_id[0];
  const auto path = scratch("duplicate_ids.h5");
  write_sample_shard(path, b, {});
  try {
    read_sample_shard(path);
    BOOST_FAIL("a shard with a duplicate sample_id was read");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(path.string() + ": /sample_id: sample_id 1000 appears twice (sequences 0 and 2)") !=
                   std::string::npos,
               msg);
  }
}

// A sample shard labelled braid.weights: the weight reader names the format attribute, not
// the first dataset whose type does not fit ("/offsets: is stored as int64").
BOOST_AUTO_TEST_CASE(a_sample_shard_labelled_as_weights_names_the_format) {
  const auto path = scratch("samples_labelled_weights.h5");
  {
    auto f = h5::File::create(path, path.string());
    write_header(f, kWeightsFormat, kWeightsVersion);
    f.write_1d<std::int32_t>("tokens", std::vector<std::int32_t>{1, 2, 3});
    f.write_1d<std::int64_t>("offsets", std::vector<std::int64_t>{0, 3});
    f.write_1d<std::int32_t>("prompt_len", std::vector<std::int32_t>{1});
    f.write_1d<std::int64_t>("sample_id", std::vector<std::int64_t>{7});
    mark_complete(f);
    f.close();
  }
  try {
    WeightShardReader r(path);
    BOOST_FAIL("a sample shard was read as weights");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(path.string() + ": attribute format: is \"braid.weights\" but the file holds a sample shard") !=
                   std::string::npos,
               msg);
  }
}

// The prompt origins braid-generate keeps (/prompt/line, /prompt/extra with its offsets):
// they round trip, a rewrite carries them, and a shard without them reads as before.
BOOST_AUTO_TEST_CASE(prompt_origins_round_trip) {
  SampleBatch b = random_batch(4, /*scored=*/false, 21);
  b.origin = std::vector<PromptOrigin>{{1, R"({"answer":42,"id":"q1"})"},
                                       {1, R"({"answer":42,"id":"q1"})"},
                                       {3, "{}"},
                                       {7, R"({"answer":"\\frac{1}{2}","note":"caf\u00e9 \u2713"})"}};
  const auto path = scratch("origins.h5");
  write_sample_shard(path, b, {.config = "{}"});
  SampleShard s = read_sample_shard(path);
  require_equal(b, s.batch);
  BOOST_TEST_REQUIRE(s.batch.origin.has_value());
  BOOST_TEST((*s.batch.origin == *b.origin));
  const auto info = probe_sample_shard(path);
  BOOST_TEST(info.other_datasets.empty());  // known datasets, not "ignored by braid"

  // A stage that reads, adds and writes keeps them; add() gives a new sequence an empty origin.
  s.batch.add(std::vector<std::int32_t>{1, 2}, 1, 99);
  BOOST_TEST(s.batch.origin->back().line == 0);
  BOOST_TEST(s.batch.origin->back().extra == "{}");
  write_sample_shard(scratch("origins2.h5"), s.batch, {});
  BOOST_TEST(read_sample_shard(scratch("origins2.h5")).batch.origin->size() == 5u);

  // Old shards have none.
  write_sample_shard(scratch("no_origins.h5"), random_batch(2, false, 22), {});
  BOOST_TEST(!read_sample_shard(scratch("no_origins.h5")).batch.origin.has_value());
}

BOOST_AUTO_TEST_CASE(bad_prompt_origins_are_refused) {
  SampleBatch b = random_batch(2, false, 23);
  b.origin = std::vector<PromptOrigin>{{1, "{}"}, {2, "[1, 2]"}};
  auto problems = b.problems();
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("/prompt/extra: sequence 1 holds JSON that is not an object") == 0u);
  b.origin = std::vector<PromptOrigin>{{1, "{}"}};
  problems = b.problems();
  BOOST_TEST_REQUIRE(!problems.empty());
  BOOST_TEST(problems[0].find("/prompt/line: has 1 entries, expected 2") == 0u);

  // On disk: a shard with extra bytes that are no JSON, and one with only some of the datasets.
  const auto write_raw = [](const std::filesystem::path& path, bool all, const std::string& extra) {
    auto f = h5::File::create(path, path.string());
    write_header(f, kSamplesFormat, kSamplesVersion);
    f.write_1d<std::int32_t>("tokens", std::vector<std::int32_t>{1, 2});
    f.write_1d<std::int64_t>("offsets", std::vector<std::int64_t>{0, 2});
    f.write_1d<std::int32_t>("prompt_len", std::vector<std::int32_t>{1});
    f.write_1d<std::int64_t>("sample_id", std::vector<std::int64_t>{0});
    f.write_1d<std::int64_t>("prompt/line", std::vector<std::int64_t>{1});
    const std::vector<std::uint8_t> bytes(extra.begin(), extra.end());
    f.write_1d<std::uint8_t>("prompt/extra", bytes);
    if (all) f.write_1d<std::int64_t>("prompt/extra_offsets", std::vector<std::int64_t>{0, std::int64_t(bytes.size())});
    mark_complete(f);
    f.close();
  };
  write_raw(scratch("bad_extra.h5"), true, "{nope");
  try {
    read_sample_shard(scratch("bad_extra.h5"));
    BOOST_ERROR("a shard with bad /prompt/extra was read");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("/prompt/extra: sequence 0 holds text that is not JSON") != std::string::npos,
               e.what());
  }
  write_raw(scratch("partial_extra.h5"), false, "{}");
  try {
    probe_sample_shard(scratch("partial_extra.h5"));
    BOOST_ERROR("a shard with some of the /prompt datasets was read");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("/prompt: needs all of") != std::string::npos, e.what());
  }
}

// /policy_step (overcommit's deferred samples hold tokens of several policies): written and
// read per token, absent in shards without it, checked against the shard's policy_step.
BOOST_AUTO_TEST_CASE(per_token_policy_steps_round_trip_and_are_checked) {
  SampleBatch b = random_batch(4, false, 21);
  BOOST_TEST(!read_sample_shard([&] {
                const auto p = scratch("no_steps.h5");
                write_sample_shard(p, b, {.policy_step = 5});
                return p;
              }())
                  .batch.policy_step.has_value());
  b.policy_step.emplace(b.token_count(), 0);
  for (std::size_t i = 0; i < b.size(); ++i) {
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) (*b.policy_step)[t] = t % 2 == 0 ? 4 : 5;
  }
  const auto path = scratch("steps.h5");
  write_sample_shard(path, b, {.policy_step = 5});
  const SampleShard s = read_sample_shard(path);
  BOOST_TEST_REQUIRE(s.batch.policy_step.has_value());
  BOOST_TEST(*s.batch.policy_step == *b.policy_step, boost::test_tools::per_element());
  BOOST_TEST(probe_sample_shard(path).token_arrays.back() == "policy_step");
  // A shard claiming step 4 cannot hold tokens of step 5.
  write_sample_shard(path, b, {.policy_step = 4});
  try {
    read_sample_shard(path);
    BOOST_FAIL("a token of a later policy than the shard's was read");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("/policy_step") != std::string::npos);
  }
  // And adding a sequence grows the array; a short one is a named problem.
  b.add(std::vector<std::int32_t>{1, 2, 3}, 1, 77);
  BOOST_TEST(b.policy_step->size() == b.token_count());
  b.policy_step->pop_back();
  const auto problems = b.problems();
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems.front().find("/policy_step") == 0u);
}
