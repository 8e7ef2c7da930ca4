// bf16 weight storage with f32 compute: the typed-weight ops against the f32 ops (on the
// bf16-rounded weights: to f32 rounding; on the original weights: to bf16 rounding), and a
// whole model stored in bf16 against the same model in f32.
#include <boost/test/unit_test.hpp>

#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/common/tiny_models.hpp"
#include "tiny_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

using namespace braid;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = scale * (float(double(s >> 11) / double(1ull << 53)) * 2.0f - 1.0f);
  }
  return v;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = backend::float_to_bf16(v[i]);
  return b;
}

std::vector<float> widened(const std::vector<std::uint16_t>& b) {
  std::vector<float> v(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) v[i] = backend::bf16_to_float(b[i]);
  return v;
}

// max |a − b| / max |b|: the normalised error of a against the reference b.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

// Same product, another summation order at most: 1e-6 up to one depth slice (2048), and
// growing as the square root of the depth past it, where the slices' partial sums add up in
// an order that depends on OpenBLAS's kernel for this CPU (3x80x4500 measured 1.2e-6).
constexpr double kF32 = 1e-6;
double f32_bound(std::int64_t k) { return kF32 * std::max(1.0, std::sqrt(double(k) / 2048.0)); }
constexpr double kBf16 = 2e-2;    // bf16 keeps 8 bits of mantissa: 2^-8 per weight

}  // namespace

// Every transposition and shape class the engine uses: row split, column split, a narrow B
// (value head), one row (decode), on 1 and 3 threads.
BOOST_AUTO_TEST_CASE(bf16_gemm_matches_f32_gemm_on_rounded_weights) {
  struct Shape { bool ta, tb; std::int64_t m, n, k; };
  const Shape shapes[] = {{false, true, 96, 200, 64},  {false, false, 96, 200, 64}, {false, true, 300, 1, 48},
                          {false, false, 300, 48, 1},  {false, true, 1, 500, 64},   {false, false, 1, 130, 70},
                          {true, true, 40, 333, 50},   {false, true, 7, 70, 9},
                          // deeper than one depth slice (2048): the LM head's backward
                          {false, false, 5, 100, 5000}, {true, true, 3, 80, 4500}, {false, false, 1, 90, 3000}};
  for (int threads : {1, 3}) {
    auto be = backend::make_cpu_backend(threads);
    auto& ops = be->ops<float>();
    for (const Shape& s : shapes) {
      const std::int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
      const auto a = random_floats(std::size_t(s.m * s.k), 1);
      const auto w = random_floats(std::size_t(s.n * s.k), 2, 0.1f);
      const auto w16 = to_bf16(w);
      const auto wr = widened(w16);
      const auto c0 = random_floats(std::size_t(s.m * s.n), 3);
      std::vector<float> got = c0, ref = c0, exact = c0;
      ops.gemm(s.ta, s.tb, s.m, s.n, s.k, 0.5f, a.data(), lda, backend::Weights{w16.data(), backend::DType::bf16},
               ldb, 0.25f, got.data(), s.n);
      ops.gemm(s.ta, s.tb, s.m, s.n, s.k, 0.5f, a.data(), lda, wr.data(), ldb, 0.25f, ref.data(), s.n);
      ops.gemm(s.ta, s.tb, s.m, s.n, s.k, 0.5f, a.data(), lda, w.data(), ldb, 0.25f, exact.data(), s.n);
      BOOST_TEST_CONTEXT("threads " << threads << " ta " << s.ta << " tb " << s.tb << " " << s.m << "x" << s.n << "x" << s.k) {
        BOOST_TEST(rel_error(got, ref) < f32_bound(s.k));
        BOOST_TEST(rel_error(got, exact) < kBf16);
        BOOST_TEST(rel_error(got, exact) > 0.0);   // the weights really were rounded
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bf16_embedding_and_rmsnorm_match_f32_on_rounded_weights) {
  auto be = backend::make_cpu_backend(2);
  auto& ops = be->ops<float>();
  const std::int64_t V = 50, D = 40, N = 30;
  const auto table = random_floats(std::size_t(V * D), 4);
  const auto t16 = to_bf16(table);
  const auto tr = widened(t16);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < N; ++i) ids.push_back((i * 7 + 3) % V);
  std::vector<float> got(std::size_t(N * D)), ref(got.size()), exact(got.size());
  ops.embedding_forward(ids.data(), N, backend::Weights{t16.data(), backend::DType::bf16}, D, got.data());
  ops.embedding_forward(ids.data(), N, tr.data(), D, ref.data());
  ops.embedding_forward(ids.data(), N, table.data(), D, exact.data());
  BOOST_TEST(got == ref);   // a gather widens exactly
  BOOST_TEST(rel_error(got, exact) < kBf16);

  const auto x = random_floats(std::size_t(N * D), 5);
  auto gain = random_floats(std::size_t(D), 6, 0.5f);
  for (float& g : gain) g += 1.0f;
  const auto g16 = to_bf16(gain);
  const auto gr = widened(g16);
  const backend::Weights gw{g16.data(), backend::DType::bf16};
  std::vector<float> y(std::size_t(N * D)), yr(y.size()), ye(y.size()), rs(N), rsr(N), rse(N);
  ops.rmsnorm_forward(x.data(), gw, N, D, 1e-5, y.data(), rs.data());
  ops.rmsnorm_forward(x.data(), gr.data(), N, D, 1e-5, yr.data(), rsr.data());
  ops.rmsnorm_forward(x.data(), gain.data(), N, D, 1e-5, ye.data(), rse.data());
  BOOST_TEST(rel_error(y, yr) < kF32);
  BOOST_TEST(rel_error(y, ye) < kBf16);
  BOOST_TEST(rs == rsr);

  const auto dy = random_floats(std::size_t(N * D), 7);
  std::vector<float> dx(y.size()), dxr(y.size()), dw(static_cast<std::size_t>(D)), dwr(static_cast<std::size_t>(D));
  ops.rmsnorm_backward(x.data(), gw, rs.data(), dy.data(), N, D, dx.data(), dw.data());
  ops.rmsnorm_backward(x.data(), gr.data(), rs.data(), dy.data(), N, D, dxr.data(), dwr.data());
  BOOST_TEST(rel_error(dx, dxr) < kF32);
  BOOST_TEST(rel_error(dw, dwr) < kF32);
}

BOOST_AUTO_TEST_CASE(convert_rounds_to_nearest_even_and_widens_exactly) {
  auto be = backend::make_cpu_backend(1);
  auto& ops = be->ops<float>();
  const std::vector<float> x{1.0f, 1.00390625f /* halfway: stays 1 */, 1.01171875f /* halfway: up */, -3.14159f, 0.0f};
  std::vector<std::uint16_t> b(x.size());
  ops.convert(std::int64_t(x.size()), x.data(), backend::DType::f32, b.data(), backend::DType::bf16);
  BOOST_TEST(b == to_bf16(x));
  BOOST_TEST(backend::bf16_to_float(b[1]) == 1.0f);
  BOOST_TEST(backend::bf16_to_float(b[2]) == 1.015625f);
  std::vector<float> back(x.size());
  ops.convert(std::int64_t(x.size()), b.data(), backend::DType::bf16, back.data(), backend::DType::f32);
  BOOST_TEST(back == widened(b));
}

namespace {

model::ModelConfig small_config() {
  return test::tiny_config({.hidden = 64, .intermediate = 160, .vocab = 97, .positions = 64, .rms_norm_eps = 1e-5});
}

// The pass the comparisons are made on: two sequences of 50 and 40 tokens.
test::WholePass run(model::Model& m) { return test::whole_pass(m, 90, 50, 32); }

}  // namespace

// The same weights (the bf16-rounded ones, so that only the storage differs) give the same
// forward and gradients to f32 rounding; against the unrounded f32 model, to bf16 rounding.
BOOST_AUTO_TEST_CASE(bf16_model_matches_the_f32_model_and_halves_weight_memory) {
  auto be = backend::make_cpu_backend(2);
  const model::ModelOptions f32_opt{.value_head = true};
  model::ModelOptions bf16_opt = f32_opt;
  bf16_opt.dtype = backend::DType::bf16;
  model::Model exact(small_config(), f32_opt, *be), rounded(small_config(), f32_opt, *be),
      half(small_config(), bf16_opt, *be);
  exact.init_random(3, 0.05);
  half.init_random(3, 0.05);
  std::vector<float> host;
  for (std::size_t i = 0; i < half.tensors().size(); ++i) {
    const auto& t = half.tensors()[i];
    BOOST_TEST_REQUIRE(t.data == nullptr);   // a model that only runs keeps no f32 copy
    host.resize(std::size_t(t.numel));
    model::read_values(*be, t, host.data());
    model::write_values(*be, rounded.tensors()[i], host.data());
  }
  BOOST_TEST((half.dtype() == backend::DType::bf16));
  BOOST_TEST(half.parameter_count() == exact.parameter_count());
  BOOST_TEST(2 * half.parameter_bytes() == exact.parameter_bytes());
  BOOST_TEST(exact.parameter_bytes() == 4 * exact.parameter_count());
  BOOST_CHECK_THROW(half.parameters(), std::logic_error);

  const test::WholePass a = run(half), b = run(rounded), e = run(exact);
  BOOST_TEST(rel_error(a.output, b.output) < 1e-5);
  BOOST_TEST(rel_error(a.logprob, b.logprob) < 1e-5);
  BOOST_TEST(rel_error(a.values, b.values) < 1e-5);
  BOOST_TEST(rel_error(a.grads, b.grads) < 1e-4);
  BOOST_TEST(rel_error(a.output, e.output) < 5e-2);
  BOOST_TEST(rel_error(a.logprob, e.logprob) < 5e-2);
  BOOST_TEST(rel_error(a.grads, e.grads) < 1e-1);
  BOOST_TEST(rel_error(a.output, e.output) > 0.0);
}

BOOST_AUTO_TEST_CASE(bf16_cached_forward_matches_the_full_forward) {
  auto be = backend::make_cpu_backend(1);
  model::Model m(small_config(), {.dtype = backend::DType::bf16}, *be);
  m.init_random(5);
  const std::vector<std::int32_t> tokens{3, 14, 15, 92, 65, 35, 89, 79};
  const std::vector<std::int64_t> offsets{0, 8};
  auto full = m.make_activations({.max_tokens = 8, .max_sequences = 1});
  m.forward({tokens, offsets}, full);
  std::vector<float> logits(97), ref(97);
  m.lm_logits(full.output() + 7 * 64, 1, ref.data());
  auto cache = m.make_kv_cache(1, 16);
  auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 1});
  const model::Segment prefill[] = {{0, 5}}, rest[] = {{0, 3}};
  m.forward_cached(std::span(tokens).first(5), prefill, cache, acts);
  m.forward_cached(std::span(tokens).subspan(5), rest, cache, acts);
  std::copy_n(acts.logits(), 97, logits.begin());
  BOOST_TEST(rel_error(logits, ref) < 1e-5);
}
