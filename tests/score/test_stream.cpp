// The shard stream: outputs named after inputs, GRPO groups that straddle shards wait
// until whole, an incomplete group at the end is named, reruns skip what is done.
#define BOOST_TEST_MODULE score_stream
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "io/sample_shard.hpp"
#include "score/shard_stream.hpp"
#include "tests/common/scratch.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tests/common/input_error.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

namespace fs = std::filesystem;
using braid::io::SampleBatch;

namespace {

constexpr std::int32_t kBos = 256;

// Sample `id` has a response of (id % 5) + 1 'a's: under length:3 the rewards of a group differ.
SampleBatch samples(std::int64_t first, std::int64_t count) {
  SampleBatch b;
  for (std::int64_t id = first; id < first + count; ++id) {
    std::vector<std::int32_t> seq{kBos, 'q'};
    for (std::int64_t k = 0; k <= id % 5; ++k) seq.push_back('a');
    b.add(seq, 2, id);
  }
  b.logprobs_actor = std::vector<float>(b.token_count(), -0.5f);
  return b;
}

fs::path write_input(const fs::path& dir, int index, const SampleBatch& b, int samples_per_prompt) {
  fs::create_directories(dir);
  const fs::path p = dir / fmt::format("gen-{:05d}.h5", index);
  braid::io::write_sample_shard(
      p, b, {.policy_step = 3, .created_by = "test",
             .config = fmt::format(R"({{"stage":"generate","samples_per_prompt":{}}})", samples_per_prompt)});
  return p;
}

// Shards 0, 1, 2 of groups of 4 in DIR/in, holding the samples from `first` on, `counts` each.
std::array<fs::path, 3> three_inputs(const fs::path& dir, std::array<int, 3> first, std::array<int, 3> counts) {
  std::array<fs::path, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = write_input(dir / "in", i, samples(first[i], counts[i]), 4);
  return out;
}

struct Grpo {
  std::unique_ptr<braid::tok::Tokenizer> tok = braid::tok::load_tokenizer("byte");
  braid::score::RuleReward rule = braid::score::RuleReward::parse("length:3");
  braid::score::BatchScorer scorer{{.rule = &rule, .tokenizer = tok.get()}, {.algorithm = "grpo", .estimator = braid::rl::Estimator::group}};
  std::vector<fs::path> written;
  braid::score::ShardStream stream(const fs::path& out) {
    return braid::score::ShardStream(scorer, {.out_dir = out, .score_config = {{"stage", "score"}}},
                                     [this](const fs::path& p) { written.push_back(p); });
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(grpo_holds_shards_until_their_groups_are_whole) {
  const fs::path dir = braid::test::fresh_scratch("grpo_hold");
  // Groups of 4; shard 0 holds samples 0..5 (group 1 is half there), shard 1 holds 6..9
  // (the rest of group 1, half of group 2), shard 2 holds 10..11.
  const auto [in0, in1, in2] = three_inputs(dir, {0, 6, 10}, {6, 4, 2});
  Grpo g;
  auto stream = g.stream(dir / "out");
  stream.add(in0.string());
  BOOST_TEST(g.written.empty());  // group 1 is not whole yet
  stream.add(in1.string());
  BOOST_TEST((g.written == std::vector<fs::path>{dir / "out/scored-00000.h5"}));
  stream.add(in2.string());
  BOOST_TEST((g.written == std::vector<fs::path>{dir / "out/scored-00000.h5", dir / "out/scored-00001.h5",
                                                 dir / "out/scored-00002.h5"}));
  stream.finish();

  // Each output holds its input's sequences; advantages sum to 0 over each group and
  // are constant over a response.
  std::map<std::int64_t, double> group_sum;
  for (int i = 0; i < 3; ++i) {
    const auto s = braid::io::read_sample_shard(dir / fmt::format("out/scored-{:05d}.h5", i));
    const auto in = braid::io::read_sample_shard(dir / fmt::format("in/gen-{:05d}.h5", i));
    BOOST_TEST(s.batch.sample_id == in.batch.sample_id);
    BOOST_TEST(s.batch.tokens == in.batch.tokens);
    BOOST_TEST(!s.batch.values.has_value());
    BOOST_TEST(s.meta.policy_step == 3);
    const auto cfg = braid::json::parse(s.meta.config);
    BOOST_TEST(cfg["generate"]["samples_per_prompt"] == 4);
    BOOST_TEST(cfg["score"]["stage"] == "score");
    for (std::size_t k = 0; k < s.batch.size(); ++k) {
      const auto adv = s.batch.response_of(*s.batch.advantages, k);
      for (float a : adv) BOOST_TEST(a == adv[0]);
      group_sum[s.batch.sample_id[k] / 4] += adv[0];
      const double want_reward = std::max(0.0, 1.0 - std::abs(double(s.batch.sample_id[k] % 5 + 1) - 3.0) / 3.0);
      BOOST_TEST((*s.batch.reward)[k] == want_reward, boost::test_tools::tolerance(1e-6));
    }
    BOOST_TEST(*s.batch.returns == *s.batch.advantages);
  }
  BOOST_TEST(group_sum.size() == 3);
  for (const auto& [grp, sum] : group_sum) BOOST_TEST(std::abs(sum) < 1e-5, "group " << grp << " sums to " << sum);
}

BOOST_AUTO_TEST_CASE(grpo_names_an_incomplete_group_at_the_end) {
  const fs::path dir = braid::test::fresh_scratch("grpo_incomplete");
  const auto in0 = write_input(dir / "in", 0, samples(0, 6), 4);
  Grpo g;
  auto stream = g.stream(dir / "out");
  stream.add(in0.string());
  const std::string what = braid::test::refusal([&] { stream.finish(); });
  BOOST_TEST(what.find("group 1 (samples 4..7) has 2 of its 4 samples") != std::string::npos, what);
  BOOST_TEST(what.find(in0.string()) != std::string::npos, what);
  BOOST_TEST(!fs::exists(dir / "out/scored-00000.h5"));
}

BOOST_AUTO_TEST_CASE(grpo_rerun_skips_written_shards_and_reads_their_rewards_back) {
  const fs::path dir = braid::test::fresh_scratch("grpo_rerun");
  const auto [in0, in1, in2] = three_inputs(dir, {0, 6, 8}, {6, 2, 4});
  {
    Grpo g;
    auto stream = g.stream(dir / "out");
    for (const auto& in : {in0, in1, in2}) stream.add(in.string());
    stream.finish();
  }
  const auto before = braid::io::read_sample_shard(dir / "out/scored-00001.h5");
  fs::remove(dir / "out/scored-00001.h5");  // as if interrupted before it was written
  const auto mtime0 = fs::last_write_time(dir / "out/scored-00000.h5");
  Grpo g;
  auto stream = g.stream(dir / "out");
  for (const auto& in : {in0, in1, in2}) stream.add(in.string());
  stream.finish();
  BOOST_TEST(g.written.size() == 3);  // skipped outputs are reported again
  BOOST_TEST(stream.totals().shards_skipped == 2);
  BOOST_TEST(stream.totals().shards_scored == 1);
  BOOST_TEST((fs::last_write_time(dir / "out/scored-00000.h5") == mtime0));
  // Group 1 straddles shards 0 and 1: its advantages come out the same from the rewards read back.
  const auto after = braid::io::read_sample_shard(dir / "out/scored-00001.h5");
  BOOST_TEST(*after.batch.advantages == *before.batch.advantages);
}

BOOST_AUTO_TEST_CASE(grpo_refuses_a_sample_seen_twice) {
  const fs::path dir = braid::test::fresh_scratch("grpo_dup");
  const auto in0 = write_input(dir / "in", 0, samples(0, 4), 4);
  const auto in1 = write_input(dir / "in", 1, samples(2, 4), 4);
  Grpo g;
  auto stream = g.stream(dir / "out");
  stream.add(in0.string());
  try {
    stream.add(in1.string());
    BOOST_FAIL("a duplicate sample was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.file() == in1.string());
    BOOST_TEST(e.field() == "/sample_id");
  }
}

BOOST_AUTO_TEST_CASE(two_inputs_may_not_share_an_output) {
  const fs::path dir = braid::test::fresh_scratch("same_name");
  const auto a = write_input(dir / "a", 0, samples(0, 4), 4);
  const auto b = write_input(dir / "b", 0, samples(4, 4), 4);
  Grpo g;
  auto stream = g.stream(dir / "out");
  stream.add(a.string());
  BOOST_CHECK_THROW(stream.add(b.string()), braid::InputError);
}

BOOST_AUTO_TEST_CASE(ppo_writes_each_shard_as_it_is_scored) {
  const fs::path dir = braid::test::fresh_scratch("ppo");
  auto be = braid::backend::make_cpu_backend(1);
  braid::model::Model critic({.hidden_size = 16, .num_hidden_layers = 1, .num_attention_heads = 2,
                              .num_key_value_heads = 1, .intermediate_size = 24, .vocab_size = 259,
                              .max_position_embeddings = 32},
                             {.lm_head = false, .value_head = true}, *be);
  critic.init_random(5, 0.1);
  const auto tok = braid::tok::load_tokenizer("byte");
  const auto rule = braid::score::RuleReward::parse("chars:a");
  braid::score::BatchScorer scorer({.critic = &critic, .rule = &rule, .tokenizer = tok.get()},
                                   {.algorithm = "ppo", .gamma = 0.9, .lambda = 0.8});
  std::vector<fs::path> written;
  braid::score::ShardStream stream(scorer, {.out_dir = dir / "out", .prefix = "ppo"},
                                   [&](const fs::path& p) { written.push_back(p); });
  const auto in = write_input(dir / "in", 7, samples(0, 3), 1);  // a lone partial group is fine for PPO
  stream.add(in.string());
  BOOST_TEST((written == std::vector<fs::path>{dir / "out/ppo-00007.h5"}));
  stream.finish();
  const auto s = braid::io::read_sample_shard(dir / "out/ppo-00007.h5");
  BOOST_TEST(s.batch.values.has_value());
  BOOST_TEST(!s.batch.logprobs_ref.has_value());
  for (float r : *s.batch.reward) BOOST_TEST(r == 1.0f);
  BOOST_TEST(stream.totals().sequences == 3);
}
