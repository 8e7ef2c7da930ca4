// Generation over the paged KV cache (model/model.hpp, docs/engine-io.md): the same samples
// as the contiguous cache gave before it (a stored run), whatever the pool's size.
//
// tests/fixtures/generate/stored_run.json was written by this test with
// BRAID_UPDATE_FIXTURES=1 from the contiguous KV cache, before the paged one replaced it.
#define BOOST_TEST_MODULE generate_paged
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/json.hpp"
#include "generate/generate.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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

// Prompts of 1 to 21 tokens: some span two 16-token blocks before the first decode step.
std::vector<Prompt> prompts(int n) {
  std::vector<Prompt> ps;
  for (int i = 0; i < n; ++i) {
    Prompt p{.sample_id = static_cast<std::uint64_t>(100 + i)};
    for (int k = 0; k <= (i * 5) % 21; ++k) p.tokens.push_back((i * 7 + k * 3) % 24);
    ps.push_back(p);
  }
  return ps;
}

struct Fixture {
  std::unique_ptr<braid::backend::Backend> be = braid::backend::make_cpu_backend(1);
  Model m{tiny(), {}, *be};
  Fixture() { m.init_random(17, 0.3); }
};

GenerateOptions stored_run_options() {
  return {.sampling = {.temperature = 1.0, .top_p = 0.95, .seed = 42},
          .max_batch = 3,
          .max_new_tokens = 30,
          .stop_tokens = {5}};
}

std::string stored_run_path() {
  return std::string(std::getenv("BRAID_FIXTURES")) + "/generate/stored_run.json";
}

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
