#define BOOST_TEST_MODULE generate
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "generate/generate.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

using braid::gen::FinishReason;
using braid::gen::GenerateOptions;
using braid::gen::Prompt;
using braid::gen::Sample;
using braid::model::Model;
using braid::model::ModelConfig;

namespace {

ModelConfig tiny() {
  return ModelConfig{.hidden_size = 32, .num_hidden_layers = 2, .num_attention_heads = 4,
      .num_key_value_heads = 2, .intermediate_size = 48, .vocab_size = 24,
      .max_position_embeddings = 64};
}

std::vector<Prompt> prompts(int n) {
  std::vector<Prompt> ps;
  for (int i = 0; i < n; ++i) {
    Prompt p{.sample_id = static_cast<std::uint64_t>(100 + i)};
    for (int k = 0; k <= (i * 5) % 9; ++k) p.tokens.push_back((i * 7 + k * 3) % 24);
    ps.push_back(p);
  }
  return ps;
}

struct Fixture {
  std::unique_ptr<braid::backend::Backend> be = braid::backend::make_cpu_backend(1);
  Model m{tiny(), {}, *be};
  // Weights larger than HF's 0.02 so that the random model's distributions are far
  // from uniform and stop tokens come at varied steps.
  Fixture() { m.init_random(17, 0.3); }
};

// log_softmax of full-forward logits at each response token: the reference the
// generator's prefill + KV-cache decode must match.
std::vector<float> full_forward_logprobs(const Model& m, const Sample& s, std::vector<std::int32_t>* argmax = nullptr) {
  std::vector<std::int32_t> tokens = s.prompt;
  tokens.insert(tokens.end(), s.response.begin(), s.response.end());
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int64_t> offsets{0, n};
  auto acts = m.make_activations({.max_tokens = n, .max_sequences = 1});
  m.forward({tokens, offsets}, acts);
  const std::int64_t V = m.config().vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(n * V));
  m.lm_logits(acts.output(), n, logits.data());
  std::vector<float> out;
  for (std::size_t i = 0; i < s.response.size(); ++i) {
    const std::size_t row = s.prompt.size() - 1 + i;
    const float* l = logits.data() + row * static_cast<std::size_t>(V);
    double mx = l[0], sum = 0;
    for (std::int64_t v = 1; v < V; ++v) mx = std::max<double>(mx, l[v]);
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(l[v] - mx);
    out.push_back(static_cast<float>(l[s.response[i]] - mx - std::log(sum)));
    if (argmax) argmax->push_back(static_cast<std::int32_t>(std::max_element(l, l + V) - l));
  }
  return out;
}

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
      const auto ref = full_forward_logprobs(m, s);
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
    full_forward_logprobs(m, s, &argmax);
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
  ModelConfig c = tiny();
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
