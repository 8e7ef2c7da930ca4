// Logits, logprobs, entropies, values and every parameter gradient of a small random
// Llama match a PyTorch reference (tests/fixtures/model/make_torch_fixture.py, which
// wrote the committed llama_torch_fixture.h5) to a relative error under 1e-4, in float32.
#include <boost/test/unit_test.hpp>

#include "core/json.hpp"
#include "h5_fixture.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace braid;

using test::H5File;
using test::rel_error;

BOOST_AUTO_TEST_CASE(matches_pytorch_reference) {
  const char* fixtures = std::getenv("BRAID_FIXTURES");
  BOOST_REQUIRE_MESSAGE(fixtures, "BRAID_FIXTURES is not set");
  const std::string path = std::string(fixtures) + "/model/llama_torch_fixture.h5";
  H5File f(path);
  const auto cfg = model::parse_config(parse_json_text(f.string_attr("config"), path), path);

  auto be = backend::make_cpu_backend(2);
  model::Model m(cfg, {.lm_head = true, .value_head = true}, *be);
  for (auto& t : m.tensors()) {
    const auto w = f.floats("weights/" + t.name);
    BOOST_REQUIRE_EQUAL(std::int64_t(w.size()), t.numel);
    std::copy(w.begin(), w.end(), t.data);
  }
  const auto tokens = f.read<std::int32_t>("inputs/tokens", H5T_NATIVE_INT32);
  const auto offsets = f.read<std::int64_t>("inputs/offsets", H5T_NATIVE_INT64);
  const auto targets = f.read<std::int32_t>("inputs/targets", H5T_NATIVE_INT32);
  const auto a = f.floats("inputs/a"), b = f.floats("inputs/b"), c = f.floats("inputs/c");
  BOOST_REQUIRE(targets == rl::next_token_targets({tokens, offsets}));
  const std::int64_t n = std::int64_t(tokens.size()), V = cfg.vocab_size;

  auto acts = m.make_activations({.max_tokens = n, .max_sequences = 2, .training = true});
  m.zero_grad();
  m.forward({tokens, offsets}, acts);

  const auto rows = static_cast<std::size_t>(n);
  std::vector<float> logits(rows * std::size_t(V)), lp(rows), ent(rows), val(rows);
  m.lm_logits(acts.output(), n, logits.data());
  rl::ChunkedLmHead<float> head(*be, V, cfg.hidden_size, /*chunk_rows*/ 5);
  rl::token_logprobs(m, acts, head, targets.data(), lp.data(), ent.data());
  m.values(acts, val.data());

  const double tol = 1e-4;
  const double e_logits = rel_error(logits.data(), f.doubles("outputs/logits"));
  const double e_lp = rel_error(lp.data(), f.doubles("outputs/logprobs"));
  const double e_ent = rel_error(ent.data(), f.doubles("outputs/entropy"));
  const double e_val = rel_error(val.data(), f.doubles("outputs/values"));
  BOOST_TEST_MESSAGE("relative errors: logits " << e_logits << ", logprobs " << e_lp << ", entropy " << e_ent
                                                << ", values " << e_val);
  BOOST_CHECK_LT(e_logits, tol);
  BOOST_CHECK_LT(e_lp, tol);
  BOOST_CHECK_LT(e_ent, tol);
  BOOST_CHECK_LT(e_val, tol);

  rl::token_logprobs_backward(m, acts, head, targets.data(), a.data(), b.data());
  m.values_backward(acts, c.data());
  m.backward(acts);
  double worst = 0;
  for (auto& t : m.tensors()) {
    const double e = rel_error(t.grad, f.doubles("grads/" + t.name));
    worst = std::max(worst, e);
    BOOST_CHECK_MESSAGE(e < tol, t.name << ": gradient relative error " << e);
  }
  BOOST_TEST_MESSAGE("worst gradient relative error " << worst);
}
