#define BOOST_TEST_MODULE generate
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "generate/generate.hpp"
#include "tests/generate/tiny_generation.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

using namespace braid::gen;
using braid::model::Model;
using Fixture = braid::test::GenerationFixture;

namespace {

std::vector<Prompt> prompts(int n) { return braid::test::varied_prompts(n, 9, 24, 100); }


}  // namespace

BOOST_FIXTURE_TEST_CASE(continuous_batching_gives_the_samples_of_running_alone, Fixture) {
  const auto ps = prompts(10);
  GenerateOptions opt{.sampling = {.temperature = 1.0, .top_p = 0.95, .seed = 42},
                      .max_batch = 3,
                      .max_new_tokens = 12,
                      .stop_tokens = {5, 11}};
  braid::gen::GenerateStats stats;
  const auto batched = braid::gen::generate(m, ps, opt, &stats);

  std::int64_t alone_steps = 0;
  std::set<std::size_t> lengths;
  int stopped = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    GenerateOptions one = opt;
    one.max_batch = 1;
    braid::gen::GenerateStats st;
    const auto alone = braid::gen::generate(m, std::span(&ps[i], 1), one, &st);
    alone_steps += st.steps;
    BOOST_TEST(batched[i].sample_id == ps[i].sample_id);
    BOOST_TEST(batched[i].prompt == ps[i].tokens, boost::test_tools::per_element());
    BOOST_TEST(batched[i].response == alone[0].response, boost::test_tools::per_element());
    BOOST_TEST(batched[i].logprobs == alone[0].logprobs, boost::test_tools::tolerance(1e-5f) << boost::test_tools::per_element());
    BOOST_TEST((batched[i].finish == alone[0].finish));
    lengths.insert(batched[i].response.size());
    stopped += batched[i].finish == FinishReason::stop;
  }
  // The case is only meaningful if sequences really finished at different steps,
  // by both rules, and prompts joined a running batch.
  BOOST_TEST(lengths.size() >= 3u);
  BOOST_TEST(stopped >= 2);
  BOOST_TEST(stopped <= 8);
  BOOST_TEST(stats.steps < alone_steps / 2);
  BOOST_TEST(stats.prefill_tokens > 0);
  BOOST_TEST(stats.decode_tokens > 0);
}

BOOST_FIXTURE_TEST_CASE(kv_cache_decode_matches_a_full_forward, Fixture) {
  const auto ps = prompts(6);
  for (double temperature : {0.0, 0.7}) {
    GenerateOptions opt{.sampling = {.temperature = temperature, .top_k = 10, .seed = 3}, .max_batch = 4, .max_new_tokens = 10};
    for (const Sample& s : braid::gen::generate(m, ps, opt)) {
      BOOST_TEST(s.response.size() == 10u);
      BOOST_TEST((s.finish == FinishReason::length));
      const auto ref = braid::test::full_forward_logprobs(m, s);
      BOOST_TEST(s.raw_logprobs == ref, boost::test_tools::tolerance(1e-4f) << boost::test_tools::per_element());
      for (std::size_t i = 0; i < s.response.size(); ++i) {
        if (temperature == 0.0) BOOST_TEST(s.logprobs[i] == 0.f);
        else BOOST_TEST(s.logprobs[i] >= s.raw_logprobs[i] / 0.7f - 1e-4f);  // sharper and truncated: never less likely
      }
    }
  }
}

BOOST_FIXTURE_TEST_CASE(greedy_picks_the_full_forward_argmax, Fixture) {
  const auto ps = prompts(3);
  GenerateOptions opt{.sampling = {.temperature = 0.0}, .max_batch = 2, .max_new_tokens = 8};
  for (const Sample& s : braid::gen::generate(m, ps, opt)) {
    std::vector<std::int32_t> argmax;
    braid::test::full_forward_logprobs(m, s, &argmax);
    BOOST_TEST(s.response == argmax, boost::test_tools::per_element());
  }
}

BOOST_FIXTURE_TEST_CASE(max_len_caps_prompt_plus_response, Fixture) {
  Prompt p{.sample_id = 1, .tokens = {1, 2, 3, 4, 5, 6}};
  GenerateOptions opt{.sampling = {.seed = 1}, .max_new_tokens = 50, .max_len = 9};
  const auto s = braid::gen::generate(m, std::span(&p, 1), opt);
  BOOST_TEST(s[0].response.size() == 3u);
  BOOST_TEST((s[0].finish == FinishReason::length));
}

BOOST_FIXTURE_TEST_CASE(bad_prompts_are_refused, Fixture) {
  GenerateOptions opt;
  std::vector<Prompt> empty{{.sample_id = 1, .tokens = {}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, empty, opt), braid::InputError);
  std::vector<Prompt> outside{{.sample_id = 1, .tokens = {1, 24}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, outside, opt), braid::InputError);
  std::vector<Prompt> twice{{.sample_id = 1, .tokens = {1}}, {.sample_id = 1, .tokens = {2}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, twice, opt), braid::InputError);
}

// Large enough a vocabulary that the rows of a step are sampled in parallel threads:
// still the samples of each sequence run alone.
BOOST_AUTO_TEST_CASE(parallel_sampling_keeps_each_sequence_its_samples) {
  auto be = braid::backend::make_cpu_backend(2);
  braid::model::ModelConfig c = braid::test::generation_config();
  c.hidden_size = 16;
  c.intermediate_size = 16;
  c.vocab_size = 20000;
  Model m(c, {}, *be);
  m.init_random(5, 0.3);
  std::vector<Prompt> ps;
  for (std::uint64_t i = 0; i < 6; ++i) ps.push_back({i, {static_cast<std::int32_t>(i * 3001 % 20000), 7}});
  GenerateOptions opt{.sampling = {.temperature = 1.0, .top_p = 0.9, .seed = 8}, .max_batch = 4, .max_new_tokens = 6};
  const auto batched = braid::gen::generate(m, ps, opt);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    GenerateOptions one = opt;
    one.max_batch = 1;
    const auto alone = braid::gen::generate(m, std::span(&ps[i], 1), one);
    BOOST_TEST(batched[i].response == alone[0].response, boost::test_tools::per_element());
  }
}
