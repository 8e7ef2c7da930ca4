// The parity suite: for each model family (llama, mistral, qwen2, qwen3, gemma2, gemma3), a
// tiny random checkpoint built from a real config with the family's quirks on, run by braid
// in f32, against a plain-PyTorch reference written from transformers' modeling code
// (tests/fixtures/model/make_family_fixtures.py, which wrote the committed family_parity.h5):
// logits, next-token logprobs, entropies, values and every parameter gradient of
// L = Σ a·logprob + Σ b·entropy + Σ c·value, each within 1e-5 of the reference relative to
// the array's largest entry (max |braid − ref| / max |ref|).
//
//   test_family_parity [boost.test args] -- --backend=cpu-f32|cuda-f32
//
// A backend absent here exits 77 (ctest: skipped). --log_level=message prints the table.
#define BOOST_TEST_MODULE family_parity
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "core/json.hpp"
#include "tests/model/h5_fixture.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/backend/backend_target.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace braid;
namespace be = braid::backend;
using namespace braid::test;

namespace {

be::Backend* g_backend = nullptr;

constexpr double kTolerance = 1e-5;

struct Errors {
  double logits = 0, logprobs = 0, entropy = 0, values = 0, grads = 0;
  std::string worst_grad;
};

Errors run_family(const test::H5File& f, const std::string& path, const std::string& family) {
  be::Backend& b = *g_backend;
  const std::string g = "/" + family;
  const auto cfg = model::parse_config(parse_json_text(f.string_attr("config", g), path), path + ":" + family);
  const json tensors = parse_json_text(f.string_attr("tensors", g), path);
  const auto weights = f.floats(g + "/weights"), grads = f.floats(g + "/grads");
  bool value_bias = false;
  std::map<std::string, std::size_t> offset;
  std::size_t at = 0;
  for (const auto& t : tensors) {
    offset[t[0].get<std::string>()] = at;
    std::size_t n = 1;
    for (const auto& d : t[1]) n *= d.get<std::size_t>();
    at += n;
    value_bias = value_bias || t[0] == "score.bias";
  }
  BOOST_REQUIRE_EQUAL(at, weights.size());

  model::Model m(cfg, {.lm_head = true, .value_head = true, .value_bias = value_bias}, b);
  BOOST_REQUIRE_EQUAL(m.tensors().size(), tensors.size());  // every reference tensor is braid's, and back
  for (auto& t : m.tensors()) {
    BOOST_REQUIRE_MESSAGE(offset.count(t.name), family << ": braid's " << t.name << " is not in the reference");
    model::write_values(b, t, weights.data() + offset[t.name]);
  }
  const auto tokens = f.read<std::int32_t>("/inputs/tokens", H5T_NATIVE_INT32);
  const auto offsets = f.read<std::int64_t>("/inputs/offsets", H5T_NATIVE_INT64);
  const auto targets_host = f.read<std::int32_t>("/inputs/targets", H5T_NATIVE_INT32);
  BOOST_REQUIRE(targets_host == rl::next_token_targets({tokens, offsets}));
  const std::int64_t n = std::int64_t(tokens.size()), V = cfg.vocab_size;
  const auto rows = std::size_t(n);
  auto to_f32 = [](const std::vector<double>& d) { return std::vector<float>(d.begin(), d.end()); };
  const auto a = upload(b, to_f32(f.doubles(g + "/a"))), bb = upload(b, to_f32(f.doubles(g + "/b"))),
             c = upload(b, to_f32(f.doubles(g + "/c")));
  const auto targets = upload(b, targets_host);

  auto acts = m.make_activations({.max_tokens = n, .max_sequences = 2, .training = true});
  m.zero_grad();
  m.forward({tokens, offsets}, acts);
  be::Buffer<float> logits(b, rows * std::size_t(V)), lp(b, rows), ent(b, rows), val(b, rows);
  m.lm_logits(acts.output(), n, logits.data());
  rl::ChunkedLmHead<float> head(m, /*chunk_rows*/ 4);   // chunks straddle the sequences
  rl::token_logprobs(m, acts, head, targets.data(), lp.data(), ent.data());
  m.values(acts, val.data());
  Errors e;
  e.logits = test::rel_error(download(b, logits.data(), logits.size()).data(), f.doubles(g + "/logits"));
  e.logprobs = test::rel_error(download(b, lp.data(), rows).data(), f.doubles(g + "/logprobs"));
  e.entropy = test::rel_error(download(b, ent.data(), rows).data(), f.doubles(g + "/entropy"));
  e.values = test::rel_error(download(b, val.data(), rows).data(), f.doubles(g + "/values"));

  rl::token_logprobs_backward(m, acts, head, targets.data(), a.data(), bb.data());
  m.values_backward(acts, c.data());
  m.backward(acts);
  for (const auto& t : m.tensors()) {
    const std::size_t o = offset[t.name];
    const std::vector<double> ref(grads.begin() + long(o), grads.begin() + long(o) + t.numel);
    const double err = test::rel_error(download(b, t.grad, std::size_t(t.numel)).data(), ref);
    BOOST_TEST(err < kTolerance, family << ": gradient of " << t.name << ": relative error " << err);
    if (err >= e.grads) {
      e.grads = err;
      e.worst_grad = t.name;
    }
  }
  return e;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_family_matches_its_reference) {
  const char* fixtures = std::getenv("BRAID_FIXTURES");
  BOOST_REQUIRE_MESSAGE(fixtures, "BRAID_FIXTURES is not set");
  const std::string path = std::string(fixtures) + "/model/family_parity.h5";
  test::H5File f(path);
  BOOST_TEST_MESSAGE(fmt::format("{:<8} {:>10} {:>10} {:>10} {:>10} {:>10}  (max |braid − ref| / max |ref|, {})",
                                 "family", "logits", "logprobs", "entropy", "values", "grads", g_backend->name()));
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3"}) {
    BOOST_TEST_CONTEXT(family) {
      const Errors e = run_family(f, path, family);
      BOOST_TEST_MESSAGE(fmt::format("{:<8} {:>10.2e} {:>10.2e} {:>10.2e} {:>10.2e} {:>10.2e}  (worst: {})", family,
                                     e.logits, e.logprobs, e.entropy, e.values, e.grads, e.worst_grad));
      BOOST_TEST(e.logits < kTolerance);
      BOOST_TEST(e.logprobs < kTolerance);
      BOOST_TEST(e.entropy < kTolerance);
      BOOST_TEST(e.values < kTolerance);
    }
  }
}

int main(int argc, char** argv) {
  const auto target =
      braid::test::parse_backend_target(argc, argv, "cpu-f32", "test_family_parity", "cpu-f32, cuda-f32");
  if (!target) return 2;
  if (target->dtype != be::DType::f32) {
    std::cerr << "test_family_parity: the reference is checked in f32, not " << target->name << "\n";
    return 2;
  }
  return braid::test::run_on_target(*target, g_backend, &::init_unit_test);
}
