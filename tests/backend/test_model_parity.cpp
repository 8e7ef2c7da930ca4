// Model parity between backends: a small random Llama (grouped-query attention, three
// packed sequences of uneven length, LM head and value head), and a model of each family
// beyond it (tests/model/family_configs.hpp at head_dim 64, the tensor-core attention's:
// biases, q/k norms, GeGLU, Gemma's norms and soft-caps, sliding windows shorter than the
// sequences), run on the backend under test and on the CPU in f32 from the same weights:
// logits, next-token logprobs, entropies, values, every parameter's gradient of a loss over
// all three heads, and the parameters after two AdamW steps (global-norm clipping included). f32 must agree to 1e-4 relative
// (‖a − b‖ / ‖b‖ per array); a model stored in bf16 on the device against the same bf16
// model on the CPU to bf16 tolerance (the device also rounds activations to bf16 in its
// tensor-core products; the CPU keeps them in f32).
//
//   test_model_parity [boost.test args] -- --backend=cuda-f32|cuda-bf16|cpu-f32
//
// A backend absent here (no CUDA build, no GPU) exits 77: ctest reports it skipped.
#define BOOST_TEST_MODULE model_parity
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "backend/registry.hpp"
#include "tests/backend/backend_target.hpp"
#include "core/rng.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/model/family_configs.hpp"

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#include "tests/common/tiny_models.hpp"
#endif

#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace braid;
namespace be = braid::backend;
using namespace braid::test;

namespace {


be::BackendSpec g_spec;
be::DType g_dtype = be::DType::f32;
be::Backend* g_backend = nullptr;

model::ModelConfig parity_config() {
  return test::tiny_config({.hidden = 64, .intermediate = 96, .vocab = 101, .positions = 64, .rms_norm_eps = 1e-5});
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double lo, double hi) {
  Rng rng(seed, 5);
  std::vector<float> v(n);
  for (float& x : v) x = float(lo + (hi - lo) * rng.uniform());
  return v;
}

using Results = std::map<std::string, std::vector<float>>;

using Init = std::map<std::string, std::vector<float>>;

// Everything the test compares, from one backend; weights from `init` (host, per tensor).
Results run(be::Backend& b, const model::ModelConfig& cfg, be::DType dtype, const Init& init) {
  model::Model m(cfg, {.lm_head = true, .value_head = true, .value_bias = init.count("score.bias") > 0, .dtype = dtype},
                 b);
  for (auto& t : m.tensors()) model::write_values(b, t, init.at(t.name).data());

  // Three sequences of 17, 9 and 24 tokens, packed.
  std::vector<std::int64_t> offsets{0, 17, 26, 50};
  std::vector<std::int32_t> tokens(50);
  Rng rng(11, 3);
  for (auto& t : tokens) t = std::int32_t(rng.below(std::uint64_t(cfg.vocab_size)));
  const model::Batch batch{tokens, offsets};
  const auto n = tokens.size();
  const auto targets = upload(b, rl::next_token_targets(batch));
  auto acts = m.make_activations({.max_tokens = 50, .max_sequences = 3, .training = true});
  rl::ChunkedLmHead<float> head(m, /*chunk_rows*/ 16);   // the model's final soft-cap
  be::Buffer<float> lp(b, n), ent(b, n), val(b, n), logits(b, n * std::size_t(cfg.vocab_size));
  // L = Σ a·logprob + Σ c·entropy + Σ d·value, fixed random weights.
  const auto a = upload(b, random_floats(n, 21, -1, 1)), c = upload(b, random_floats(n, 22, -1, 1)),
             d = upload(b, random_floats(n, 23, -1, 1));

  optim::AdamW opt(b, m.tensors(), {.weight_decay = 0.1, .max_grad_norm = 0.5});
  Results r;
  for (int step = 0; step < 2; ++step) {
    m.zero_grad();
    m.forward(batch, acts);
    rl::token_logprobs(m, acts, head, targets.data(), lp.data(), ent.data());
    m.values(acts, val.data());
    if (step == 0) {
      m.lm_logits(acts.output(), std::int64_t(n), logits.data());
      r["logits"] = download(b, logits.data(), logits.size());
      r["logprob"] = download(b, lp.data(), n);
      r["entropy"] = download(b, ent.data(), n);
      r["values"] = download(b, val.data(), n);
    }
    rl::token_logprobs_backward(m, acts, head, targets.data(), a.data(), c.data());
    m.values_backward(acts, d.data());
    m.backward(acts);
    if (step == 0) {
      for (const auto& t : m.tensors()) r["grad " + t.name] = download(b, t.grad, std::size_t(t.numel));
    }
    opt.step(1e-3);  // small: an Adam step is ±lr wherever a tiny gradient's sign differs by rounding
  }
  for (const auto& t : m.tensors()) {
    std::vector<float> w(std::size_t(t.numel));
    model::read_values(b, t, w.data());
    r["after 2 steps " + t.name] = w;
  }
#ifdef BRAID_HAVE_CUDA
  if (auto mem = be::device_memory_stats(b)) {
    std::cout << b.name() << ": peak device memory " << mem->peak << " bytes, reserved " << mem->reserved << "\n";
  }
#endif
  return r;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return norm == 0 ? std::sqrt(err) : std::sqrt(err / norm);
}

// The weights, drawn once (std 0.2: logits far from uniform, so the softmax matters);
// with `vectors`, biases and norm gains random too (init_random gives 0 and 1).
Init initial_weights(const model::ModelConfig& cfg, bool value_bias, bool vectors) {
  auto cpu = be::make_cpu_backend(1);
  model::Model m(cfg, {.lm_head = true, .value_head = true, .value_bias = value_bias}, *cpu);
  m.init_random(7, 0.2);
  Init init;
  std::uint64_t seed = 30;
  for (const auto& t : m.tensors()) {
    std::vector<float> w(std::size_t(t.numel));
    model::read_values(*cpu, t, w.data());
    if (vectors && t.shape.size() == 1) {
      const double gain = t.name.find("norm") != std::string::npos ? 1.0 - cfg.norm_weight_offset : 0.0;
      w = random_floats(w.size(), ++seed, gain - 0.2, gain + 0.2);
    }
    init[t.name] = w;
  }
  return init;
}

// The backend under test against the CPU on the same weights; f32: rounding differences
// only (summation order); bf16: both round weights the same way, the device's products
// also round activations to bf16 (2^-9 relative each).
void compare(const model::ModelConfig& cfg, const Init& init, const std::string& what_model) {
  auto cpu = be::make_cpu_backend(2);
  const Results ref = run(*cpu, cfg, g_dtype, init);
  const Results got = run(*g_backend, cfg, g_dtype, init);
  const double tol = g_dtype == be::DType::f32 ? 1e-4 : 3e-2;
  BOOST_TEST(ref.size() == got.size());
  BOOST_TEST(ref.size() > 20u);
  double worst = 0;
  for (const auto& [what, want] : ref) {
    const auto& have = got.at(what);
    BOOST_REQUIRE_EQUAL(have.size(), want.size());
    bool finite = true;
    for (float x : have) finite = finite && std::isfinite(x);
    BOOST_TEST(finite, what_model << " " << what << " has a NaN or Inf");
    const double e = relative_error(have, want);
    worst = std::max(worst, e);
    BOOST_TEST_MESSAGE(what_model << " " << what << ": relative error " << e);
    BOOST_TEST(e <= tol, what_model << " " << what << ": relative error " << e << " > " << tol);
  }
  BOOST_TEST_MESSAGE(what_model << ": worst relative error " << worst);
}

}  // namespace

BOOST_AUTO_TEST_CASE(same_model_same_numbers) {
  const Init init = initial_weights(parity_config(), false, false);
  compare(parity_config(), init, "llama");
  auto cpu = be::make_cpu_backend(1);
  const Results ref = run(*cpu, parity_config(), g_dtype, init);
  // The harness sees a difference: a perturbed copy fails the f32 tolerance.
  std::vector<float> off = ref.at("logprob");
  off[3] += 0.01f;
  BOOST_TEST(relative_error(off, ref.at("logprob")) > 1e-4);
}

BOOST_AUTO_TEST_CASE(every_family_same_numbers) {
  for (const auto& f : test::family_configs({.hidden = 64, .heads = 4, .kv_heads = 2, .head_dim = 64, .inter = 96,
                                             .vocab = 101, .layers = 3, .max_positions = 64})) {
    BOOST_TEST_CONTEXT(f.name) {
      const model::ModelConfig cfg = f.parsed();
      compare(cfg, initial_weights(cfg, /*value_bias*/ true, /*vectors*/ true), f.name);
    }
  }
}

int main(int argc, char** argv) {
  const auto target =
      braid::test::parse_backend_target(argc, argv, "cuda-f32", "test_model_parity", "cuda-f32, cuda-bf16");
  if (!target) return 2;
  if (target->dtype != be::DType::f32 && target->dtype != be::DType::bf16) {
    std::cerr << "test_model_parity: --backend=" << target->name << " is not DEVICE-DTYPE (cuda-f32, cuda-bf16)\n";
    return 2;
  }
  g_spec = target->spec;
  g_dtype = target->dtype;
  return braid::test::run_on_target(*target, g_backend, &::init_unit_test);
}
