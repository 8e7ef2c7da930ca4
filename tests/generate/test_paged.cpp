// Generation over the paged KV cache (model/model.hpp, docs/engine-io.md): the same samples
// as the contiguous cache gave before it (a stored run), whatever the pool's size.
//
// tests/fixtures/generate/stored_run.json was written by this test with
// BRAID_UPDATE_FIXTURES=1 from the contiguous KV cache, before the paged one replaced it.
#define BOOST_TEST_MODULE generate_paged
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "generate/generate.hpp"
#include "tests/generate/tiny_generation.hpp"
#include "tests/common/input_error.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace braid::gen;
using Fixture = braid::test::GenerationFixture;

namespace {

// Prompts of 1 to 21 tokens: some span two 16-token blocks before the first decode step.
std::vector<Prompt> prompts(int n) { return braid::test::varied_prompts(n, 21, 24, 100); }

GenerateOptions stored_run_options() {
  return {.sampling = {.temperature = 1.0, .top_p = 0.95, .seed = 42},
          .max_batch = 3,
          .max_new_tokens = 30,
          .stop_tokens = {5}};
}

std::string stored_run_path() {
  return std::string(std::getenv("BRAID_FIXTURES")) + "/generate/stored_run.json";
}

void check_same(const std::vector<Sample>& got, const std::vector<Sample>& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i].sample_id == want[i].sample_id);
    BOOST_TEST(got[i].response == want[i].response, boost::test_tools::per_element());
    BOOST_TEST(got[i].logprobs == want[i].logprobs, boost::test_tools::tolerance(1e-5f) << boost::test_tools::per_element());
    BOOST_TEST(got[i].raw_logprobs == want[i].raw_logprobs,
               boost::test_tools::tolerance(1e-5f) << boost::test_tools::per_element());
    BOOST_TEST((got[i].finish == want[i].finish));
  }
}

// Bytes of one block of 16 tokens of the tiny model: keys and values, 2 layers, 2 kv heads of 8, f32.
constexpr std::int64_t kBlockBytes = 2 * 2 * 16 * 2 * 8 * 4;

braid::json to_json(const std::vector<Sample>& samples) {
  braid::json out = braid::json::array();
  for (const Sample& s : samples) {
    out.push_back({{"sample_id", s.sample_id}, {"response", s.response}, {"logprobs", s.logprobs},
                   {"raw_logprobs", s.raw_logprobs}, {"finish", braid::gen::to_string(s.finish)}});
  }
  return out;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(paged_generation_gives_the_stored_run, Fixture) {
  const auto ps = prompts(12);
  const auto got = braid::gen::generate(m, ps, stored_run_options());
  if (std::getenv("BRAID_UPDATE_FIXTURES")) {
    std::ofstream(stored_run_path()) << to_json(got).dump(1) << "\n";
    BOOST_TEST_MESSAGE("wrote " << stored_run_path());
  }
  std::ifstream in(stored_run_path());
  BOOST_TEST_REQUIRE(in.good(), "no " << stored_run_path());
  const braid::json want = braid::json::parse(in);
  BOOST_TEST_REQUIRE(want.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const braid::json& w = want[i];
    BOOST_TEST(got[i].sample_id == w.at("sample_id").get<std::uint64_t>());
    BOOST_TEST(got[i].response == w.at("response").get<std::vector<std::int32_t>>(), boost::test_tools::per_element());
    BOOST_TEST(got[i].logprobs == w.at("logprobs").get<std::vector<float>>(),
               boost::test_tools::tolerance(1e-5f) << boost::test_tools::per_element());
    BOOST_TEST(got[i].raw_logprobs == w.at("raw_logprobs").get<std::vector<float>>(),
               boost::test_tools::tolerance(1e-5f) << boost::test_tools::per_element());
    BOOST_TEST(std::string(braid::gen::to_string(got[i].finish)) == w.at("finish").get<std::string>());
  }
}

// A pool of 5 blocks for 6 sequences of up to 51 tokens (4 blocks each): sequences are
// preempted and resumed by re-prefilling, and the samples are those of an ample pool.
BOOST_FIXTURE_TEST_CASE(a_tiny_pool_preempts_and_gives_the_samples_of_a_large_one, Fixture) {
  BOOST_TEST(m.kv_block_bytes(16, braid::backend::DType::f32) == kBlockBytes);
  const auto ps = prompts(12);
  GenerateOptions large = stored_run_options();
  large.max_batch = 6;
  braid::gen::GenerateStats large_stats, tiny_stats;
  const auto want = braid::gen::generate(m, ps, large, &large_stats);
  BOOST_TEST(large_stats.preemptions == 0);
  BOOST_TEST(large_stats.kv_blocks == 6 * 4);

  GenerateOptions tiny = large;
  tiny.kv_cache_bytes = 5 * kBlockBytes;
  const auto got = braid::gen::generate(m, ps, tiny, &tiny_stats);
  BOOST_TEST(tiny_stats.kv_blocks == 5);
  BOOST_TEST(tiny_stats.kv_peak_blocks <= 5);
  BOOST_TEST(tiny_stats.preemptions >= 3);
  BOOST_TEST(tiny_stats.steps > large_stats.steps);
  check_same(got, want);

  // Every sequence alone (a pool of 4 blocks, exactly one sequence at its longest).
  for (std::size_t i = 0; i < ps.size(); i += 3) {
    GenerateOptions one = tiny;
    one.max_batch = 1;
    one.kv_cache_bytes = 4 * kBlockBytes;
    const auto alone = braid::gen::generate(m, std::span(&ps[i], 1), one);
    check_same(alone, {want[i]});
  }
}

// Greedy with preemption: the tokens are the argmax of a full forward over the sample.
BOOST_FIXTURE_TEST_CASE(preempted_greedy_samples_match_a_full_forward, Fixture) {
  const auto ps = prompts(8);
  GenerateOptions opt{.sampling = {.temperature = 0.0}, .max_batch = 8, .max_new_tokens = 20,
                      .kv_cache_bytes = 4 * kBlockBytes};
  braid::gen::GenerateStats stats;
  const auto got = braid::gen::generate(m, ps, opt, &stats);
  BOOST_TEST(stats.preemptions > 0);
  for (const Sample& s : got) {
    std::vector<std::int32_t> argmax;
    braid::test::full_forward_logprobs(m, s, &argmax);
    for (std::size_t i = 0; i < s.response.size(); ++i) BOOST_TEST(s.response[i] == argmax[i]);
  }
}

// A pool that cannot hold one sequence at its longest is refused before any work, with
// the figures; one that can is accepted however small.
BOOST_FIXTURE_TEST_CASE(a_pool_too_small_for_one_sequence_is_refused, Fixture) {
  const auto ps = prompts(12);   // the longest prompt: 21 tokens, + 30 new = 51 = 4 blocks
  GenerateOptions opt = stored_run_options();
  opt.kv_cache_bytes = 4 * kBlockBytes - 1;
  const std::string what = braid::test::refusal([&] { braid::gen::generate(m, ps, opt); });
  BOOST_TEST_MESSAGE(what);
  BOOST_TEST(what.find("--kv-cache-mb") != std::string::npos);
  BOOST_TEST(what.find("one sequence of up to 51 tokens needs 4 blocks of 16 tokens") != std::string::npos);
  BOOST_TEST(what.find("room for 3") != std::string::npos);
  opt.kv_cache_bytes = 4 * kBlockBytes;
  BOOST_TEST(braid::gen::generate(m, ps, opt).size() == ps.size());
}
