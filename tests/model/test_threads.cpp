// The threaded code paths (split products, chunked loops, per-chunk reductions, attention
// tasks) give the single-threaded results. Shapes are large enough that every op takes its
// parallel path; 3 threads make the splits uneven.
#include <boost/test/unit_test.hpp>

#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/common/tiny_models.hpp"
#include "tiny_model.hpp"

#include <cmath>
#include <vector>

using namespace braid;

namespace {

// The whole pass (two sequences of 170 and 130 tokens, entropy and values in the loss) on
// `threads` threads.
test::WholePass run(model::Model& m, int threads) {
  auto be = backend::make_cpu_backend(threads);  // resizes the process's pool
  BOOST_REQUIRE_EQUAL(be->threads(), threads);
  return test::whole_pass(m, 300, 170, 64, 0.1f, 0.5f);
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return diff / scale;
}

}  // namespace

BOOST_AUTO_TEST_CASE(threaded_paths_match_one_thread) {
  const model::ModelConfig c = test::tiny_config({.hidden = 256, .intermediate = 512, .vocab = 300, .positions = 256});
  auto be = backend::make_cpu_backend(1);
  model::Model m(c, {.lm_head = true, .value_head = true}, *be);
  m.init_random(9, 0.05);
  const test::WholePass one = run(m, 1);
  const test::WholePass three = run(m, 3);
  BOOST_CHECK_LT(rel_diff(three.output, one.output), 1e-5);
  BOOST_CHECK_LT(rel_diff(three.logprob, one.logprob), 1e-5);
  BOOST_CHECK_LT(rel_diff(three.values, one.values), 1e-5);
  for (const auto& t : m.tensors()) {
    const std::size_t off = std::size_t(t.data - m.parameters().data());
    std::vector<float> a(three.grads.begin() + long(off), three.grads.begin() + long(off + std::size_t(t.numel)));
    std::vector<float> b(one.grads.begin() + long(off), one.grads.begin() + long(off + std::size_t(t.numel)));
    const double e = rel_diff(a, b);
    BOOST_CHECK_MESSAGE(e < 1e-4, t.name << ": 3-thread gradient differs from 1-thread by " << e);
  }
  backend::make_cpu_backend(1);
}
