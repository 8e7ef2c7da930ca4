// Generation on the backend named by --backend (cuda-f32 on a GPU; cpu-f32 runs the same
// checks on the CPU, where they exercise the harness): greedy tokens equal the CPU's for
// a small random model, continuous batching equals one sequence at a time, decode steps
// replayed as graphs equal the same steps run eagerly, and a pool that forces preemption
// gives the samples of an ample one. A backend absent from this build or machine exits 77
// (ctest: skipped).
//
//   test_generate_device [boost.test args] -- --backend=cpu-f32|cuda-f32
#define BOOST_TEST_MODULE generate_device
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "generate/generate.hpp"
#include "tests/backend/backend_target.hpp"

#include <cstdlib>
#include <memory>
#include <vector>

using braid::gen::GenerateOptions;
using braid::gen::GenerateStats;
using braid::gen::Prompt;
using braid::gen::Sample;
using braid::model::Model;
namespace be = braid::backend;

namespace {

be::Backend* g_backend = nullptr;

braid::model::ModelConfig config() {
  return {.hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2,
          .intermediate_size = 96, .vocab_size = 101, .max_position_embeddings = 128};
}

// 12 prompts of 1 to 40 tokens.
std::vector<Prompt> prompts() {
  std::vector<Prompt> ps;
  for (int i = 0; i < 12; ++i) {
    Prompt p{.sample_id = static_cast<std::uint64_t>(7 + i)};
    for (int k = 0; k <= (i * 13) % 40; ++k) p.tokens.push_back((i * 17 + k * 5) % 101);
    ps.push_back(p);
  }
  return ps;
}

// The same random weights on any backend (init_random draws on the host, per tensor).
std::unique_ptr<Model> model_on(be::Backend& b) {
  auto m = std::make_unique<Model>(config(), braid::model::ModelOptions{}, b);
  m->init_random(11, 0.25);
  return m;
}

void check_same(const std::vector<Sample>& got, const std::vector<Sample>& want, float tol) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i].sample_id == want[i].sample_id);
    BOOST_TEST(got[i].response == want[i].response, boost::test_tools::per_element());
    BOOST_TEST(got[i].raw_logprobs == want[i].raw_logprobs,
               boost::test_tools::tolerance(tol) << boost::test_tools::per_element());
    BOOST_TEST(got[i].logprobs == want[i].logprobs, boost::test_tools::tolerance(tol) << boost::test_tools::per_element());
  }
}

GenerateOptions sampled() {
  return {.sampling = {.temperature = 1.0, .top_p = 0.9, .seed = 5}, .max_batch = 5, .max_new_tokens = 30,
          .stop_tokens = {3}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(greedy_tokens_equal_the_cpus) {
  auto cpu = be::make_cpu_backend(2);
  const auto ps = prompts();
  const GenerateOptions opt{.sampling = {.temperature = 0.0}, .max_batch = 4, .max_new_tokens = 24};
  const auto want = braid::gen::generate(*model_on(*cpu), ps, opt);
  const auto got = braid::gen::generate(*model_on(*g_backend), ps, opt);
  // f32 on both: rounding differs (summation order), the argmax does not.
  check_same(got, want, 1e-4f);
}

BOOST_AUTO_TEST_CASE(continuous_batching_equals_one_at_a_time) {
  const auto m = model_on(*g_backend);
  const auto ps = prompts();
  GenerateStats stats;
  const auto batched = braid::gen::generate(*m, ps, sampled(), &stats);
  BOOST_TEST(stats.steps > 0);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    GenerateOptions one = sampled();
    one.max_batch = 1;
    const auto alone = braid::gen::generate(*m, std::span(&ps[i], 1), one);
    check_same(alone, {batched[i]}, 1e-4f);
  }
}

// braid-generate --no-cuda-graphs (or BRAID_CUDA_GRAPHS=0) runs the steps eagerly: the same samples.
BOOST_AUTO_TEST_CASE(graphs_on_equal_graphs_off) {
  const auto m = model_on(*g_backend);
  const auto ps = prompts();
  GenerateOptions on = sampled(), off = sampled();
  on.graphs = true;
  off.graphs = false;
  GenerateStats on_stats, off_stats;
  const auto with = braid::gen::generate(*m, ps, on, &on_stats);
  const auto without = braid::gen::generate(*m, ps, off, &off_stats);
  BOOST_TEST(off_stats.graph_steps == 0);
  const char* env = std::getenv("BRAID_CUDA_GRAPHS");
  if (g_backend->supports_graphs() && !(env && std::string(env) == "0")) {
    // Pure decode steps replayed (most steps here; the rest prefill): none fell back to eager.
    BOOST_TEST(on_stats.graph_steps > 0);
    BOOST_TEST(on_stats.graph_steps >= on_stats.steps / 2);
  } else {
    BOOST_TEST(on_stats.graph_steps == 0);
  }
  BOOST_TEST(on_stats.steps == off_stats.steps);
  // A padded graph multiplies more rows than the eager step: products may round differently.
  check_same(with, without, 1e-4f);
}

BOOST_AUTO_TEST_CASE(a_tiny_pool_gives_the_samples_of_an_ample_one) {
  const auto m = model_on(*g_backend);
  const auto ps = prompts();
  GenerateStats ample_stats, tiny_stats;
  const auto ample = braid::gen::generate(*m, ps, sampled(), &ample_stats);
  GenerateOptions tiny = sampled();
  // The longest sequence (40 + 30 tokens) needs 5 blocks; 6 blocks for 5 sequences.
  tiny.kv_cache_bytes = 6 * m->kv_block_bytes(16, be::DType::f32);
  const auto got = braid::gen::generate(*m, ps, tiny, &tiny_stats);
  BOOST_TEST(ample_stats.preemptions == 0);
  BOOST_TEST(tiny_stats.kv_blocks == 6);
  BOOST_TEST(tiny_stats.preemptions > 0);
  check_same(got, ample, 1e-4f);
}

int main(int argc, char** argv) {
  const auto target =
      braid::test::parse_backend_target(argc, argv, "cuda-f32", "test_generate_device", "cpu-f32, cuda-f32");
  if (!target) return 2;
  return braid::test::run_on_target(*target, g_backend, &::init_unit_test);
}
