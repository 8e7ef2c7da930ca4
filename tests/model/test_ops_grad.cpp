// Every op's backward against finite differences of its forward, in double precision.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "grad_check.hpp"

#include <cmath>
#include <string>
#include <vector>

using namespace braid::test;
namespace be = braid::backend;

namespace {

be::Ops<double>& ops() {
  static auto backend = be::make_cpu_backend(1);
  return backend->ops<double>();
}

// Attention's three gradients against finite differences; returns the forward's output.
std::vector<double> check_attention(const be::AttentionDims& d, const std::vector<be::AttentionSegment>& segs,
                                    std::int64_t q_rows, std::int64_t kv_rows, unsigned seed, double scale,
                                    const std::string& what) {
  const std::int64_t out_w = std::int64_t(d.n_heads) * d.head_dim;
  auto q = random_values(q_rows * d.q_stride, seed, scale), k = random_values(kv_rows * d.kv_stride, seed + 1, scale);
  auto v = random_values(kv_rows * d.kv_stride, seed + 2), G = random_values(q_rows * out_w, seed + 3);
  std::vector<double> out(q_rows * out_w), lse(q_rows * d.n_heads);
  auto loss = [&] {
    ops().attention_forward(d, segs, q.data(), k.data(), v.data(), out.data(), lse.data());
    return dot(G, out);
  };
  loss();
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  ops().attention_backward(d, segs, q.data(), k.data(), v.data(), out.data(), lse.data(), G.data(), dq.data(),
                           dk.data(), dv.data());
  check_gradient(what + " dq", q.data(), q.size(), dq.data(), loss);
  check_gradient(what + " dk", k.data(), k.size(), dk.data(), loss);
  check_gradient(what + " dv", v.data(), v.size(), dv.data(), loss);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_gradients)

BOOST_AUTO_TEST_CASE(rmsnorm) {
  const std::int64_t n = 3, dim = 7;
  auto x = random_values(n * dim, 1), w = random_values(dim, 2), G = random_values(n * dim, 3);
  std::vector<double> y(n * dim), rstd(n);
  auto loss = [&] {
    ops().rmsnorm_forward(x.data(), w.data(), n, dim, 1e-5, y.data(), rstd.data());
    return dot(G, y);
  };
  loss();
  std::vector<double> dx(n * dim, 0.0), dw(dim, 0.0);
  ops().rmsnorm_backward(x.data(), w.data(), rstd.data(), G.data(), n, dim, dx.data(), dw.data());
  check_gradient("rmsnorm dx", x.data(), x.size(), dx.data(), loss);
  check_gradient("rmsnorm dw", w.data(), w.size(), dw.data(), loss);
}

BOOST_AUTO_TEST_CASE(rope_forward_and_inverse) {
  const std::int64_t n = 4, stride = 2 * 6 + 3;  // 2 heads of 6, a padded row
  const int heads = 2, hd = 6, half = 3, max_pos = 10;
  std::vector<double> cs(max_pos * half), sn(max_pos * half);
  for (int p = 0; p < max_pos; ++p)
    for (int j = 0; j < half; ++j) {
      cs[p * half + j] = std::cos(p * std::pow(100.0, -2.0 * j / hd));
      sn[p * half + j] = std::sin(p * std::pow(100.0, -2.0 * j / hd));
    }
  const std::int32_t pos[] = {0, 3, 9, 5};
  auto x = random_values(n * stride, 4), G = random_values(n * stride, 5);
  std::vector<double> y;
  auto loss = [&] {
    y = x;
    ops().rope(y.data(), n, stride, heads, hd, pos, cs.data(), sn.data(), false);
    return dot(G, y);
  };
  std::vector<double> dx = G;
  ops().rope(dx.data(), n, stride, heads, hd, pos, cs.data(), sn.data(), true);
  check_gradient("rope dx", x.data(), x.size(), dx.data(), loss);
  // Rotation then inverse rotation is the identity (and position 0 does not rotate).
  loss();
  ops().rope(y.data(), n, stride, heads, hd, pos, cs.data(), sn.data(), true);
  for (std::size_t i = 0; i < x.size(); ++i) BOOST_CHECK_SMALL(y[i] - x[i], 1e-12);
}


BOOST_AUTO_TEST_CASE(attention_grouped_causal_with_cache_offsets) {
  // A training-style segment (keys are its own rows) and a cache-style one (2 keys before it).
  check_attention({4, 2, 6, 4 * 6 + 3, 2 * 6}, {{0, 3, 0, 0}, {3, 2, 3, 2}}, 5, 7, 6, 1.0, "attention");
}

BOOST_AUTO_TEST_CASE(attention_is_causal) {
  // Changing a later key must not change an earlier query's output.
  be::AttentionDims d{2, 1, 4, 8, 4};
  const std::vector<be::AttentionSegment> segs{{0, 4, 0, 0}};
  auto q = random_values(4 * 8, 10), kv = random_values(4 * 4, 11);
  std::vector<double> out1(4 * 8), out2(4 * 8), lse(8);
  ops().attention_forward(d, segs, q.data(), kv.data(), kv.data(), out1.data(), lse.data());
  for (int c = 0; c < 4; ++c) kv[3 * 4 + c] += 1.0;
  ops().attention_forward(d, segs, q.data(), kv.data(), kv.data(), out2.data(), lse.data());
  for (int i = 0; i < 3 * 8; ++i) BOOST_CHECK_EQUAL(out1[i], out2[i]);
  double diff = 0;
  for (int i = 3 * 8; i < 4 * 8; ++i) diff += std::abs(out1[i] - out2[i]);
  BOOST_CHECK_GT(diff, 1e-6);
}

// SwiGLU and GeGLU (Gemma's tanh GELU, also against its definition).
BOOST_AUTO_TEST_CASE(gated_activations) {
  for (const bool geglu : {false, true}) {
    const std::int64_t n = 3, inter = 5;
    auto gu = random_values(n * 2 * inter, geglu ? 37 : 12, 3.0), G = random_values(n * inter, geglu ? 38 : 13);
    std::vector<double> out(n * inter), dgu(gu.size());
    auto loss = [&] {
      if (geglu) ops().geglu_forward(gu.data(), n, inter, out.data());
      else ops().swiglu_forward(gu.data(), n, inter, out.data());
      return dot(G, out);
    };
    loss();
    for (std::int64_t r = 0; geglu && r < n; ++r)
      for (std::int64_t j = 0; j < inter; ++j) {
        const double g = gu[r * 2 * inter + j], u = gu[r * 2 * inter + inter + j];
        const double gelu = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
        BOOST_CHECK_CLOSE(out[r * inter + j], gelu * u, 1e-10);
      }
    if (geglu) ops().geglu_backward(gu.data(), G.data(), n, inter, dgu.data());
    else ops().swiglu_backward(gu.data(), G.data(), n, inter, dgu.data());
    check_gradient(geglu ? "geglu d_gate_up" : "swiglu d_gate_up", gu.data(), gu.size(), dgu.data(), loss);
  }
}

BOOST_AUTO_TEST_CASE(embedding_with_repeated_tokens) {
  const std::int64_t vocab = 5, dim = 3;
  const std::int32_t ids[] = {4, 1, 4, 0};
  auto table = random_values(vocab * dim, 14), G = random_values(4 * dim, 15);
  std::vector<double> out(4 * dim);
  auto loss = [&] {
    ops().embedding_forward(ids, 4, table.data(), dim, out.data());
    return dot(G, out);
  };
  std::vector<double> dtable(table.size(), 0.0);
  ops().embedding_backward(ids, 4, G.data(), dim, dtable.data());
  check_gradient("embedding d_table", table.data(), table.size(), dtable.data(), loss);
}

BOOST_AUTO_TEST_CASE(softmax_stats_logprob_and_entropy) {
  const std::int64_t rows = 4, vocab = 9;
  const std::int32_t targets[] = {3, -1, 8, 0};
  auto z = random_values(rows * vocab, 16, 4.0), glp = random_values(rows, 17), gh = random_values(rows, 18);
  std::vector<double> lse(rows), lp(rows), ent(rows);
  auto loss = [&] {
    ops().softmax_stats(z.data(), rows, vocab, targets, lse.data(), lp.data(), ent.data());
    return dot(glp, lp) + dot(gh, ent);
  };
  loss();
  BOOST_CHECK_EQUAL(lp[1], 0.0);  // no target
  // Entropy against its definition.
  for (int r = 0; r < rows; ++r) {
    double h = 0;
    for (int j = 0; j < vocab; ++j) {
      const double p = std::exp(z[r * vocab + j] - lse[r]);
      h -= p * std::log(p);
    }
    BOOST_CHECK_CLOSE(ent[r], h, 1e-9);
  }
  std::vector<double> dz = z;
  ops().softmax_stats_backward(dz.data(), rows, vocab, targets, lse.data(), ent.data(), glp.data(), gh.data());
  check_gradient("softmax_stats dz", z.data(), z.size(), dz.data(), loss);
}

// Qwen3's and Gemma 3's q/k norms: each head of a wider row, Gemma's gain 1 + w, the
// backward written over its own input gradient.
BOOST_AUTO_TEST_CASE(rmsnorm_of_heads_with_gain_offset_in_place) {
  const std::int64_t n = 3, dim = 4, stride = 2 * 4 + 3;
  const be::NormShape s{.rows = n, .dim = dim, .groups = 2, .stride = stride, .eps = 1e-5, .weight_offset = 1.0};
  auto x = random_values(n * stride, 30), w = random_values(dim, 31, 0.3), G = random_values(n * stride, 32);
  std::vector<double> y(n * stride, 0.0), rstd(n * 2);
  auto loss = [&] {
    ops().rmsnorm_forward(x.data(), w.data(), s, y.data(), rstd.data());
    return dot(G, y);
  };
  loss();
  // The gradient lands on the heads' columns only; the others are G's own values, left.
  std::vector<double> dx = G, dw(dim, 0.0);
  be::NormShape in_place = s;
  in_place.accumulate = false;
  ops().rmsnorm_backward(x.data(), w.data(), rstd.data(), dx.data(), in_place, dx.data(), dw.data());
  std::vector<std::size_t> heads;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < 2 * dim; ++j) heads.push_back(std::size_t(r * stride + j));
  check_gradient("head rmsnorm dx", x.data(), x.size(), dx.data(), loss, heads);
  check_gradient("head rmsnorm dw", w.data(), w.size(), dw.data(), loss);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 2 * dim; j < stride; ++j) BOOST_CHECK_EQUAL(dx[r * stride + j], G[r * stride + j]);
}

// Gemma's scores: a scale of their own, soft-capped, a sliding window shorter than the
// segments; grouped-query heads and a segment with keys before it.
BOOST_AUTO_TEST_CASE(attention_with_scale_softcap_and_window) {
  be::AttentionDims d{4, 2, 6, 4 * 6 + 3, 2 * 6, /*scale*/ 0.9, /*softcap*/ 1.3, /*window*/ 3};
  const std::vector<be::AttentionSegment> segs{{0, 5, 0, 0}, {5, 3, 5, 3}};
  const std::vector<double> out = check_attention(d, segs, 8, 11, 33, 2.0, "windowed soft-capped attention");
  // The window: a key `window` positions or more before a query does not change its output.
  const std::int64_t out_w = 4 * 6;
  auto q = random_values(8 * d.q_stride, 33, 2.0), k = random_values(11 * d.kv_stride, 34, 2.0);
  auto v = random_values(11 * d.kv_stride, 35);
  for (std::int64_t c = 0; c < d.kv_stride; ++c) k[std::size_t(c)] += 1.0, v[std::size_t(c)] += 1.0;
  std::vector<double> moved(out.size()), lse(8 * 4);
  ops().attention_forward(d, segs, q.data(), k.data(), v.data(), moved.data(), lse.data());
  for (std::int64_t j = 3 * out_w; j < 5 * out_w; ++j) BOOST_CHECK_EQUAL(moved[std::size_t(j)], out[std::size_t(j)]);
  double diff = 0;
  for (std::int64_t j = 0; j < 3 * out_w; ++j) diff += std::abs(moved[std::size_t(j)] - out[std::size_t(j)]);
  BOOST_CHECK_GT(diff, 1e-6);
}

BOOST_AUTO_TEST_CASE(softcap) {
  auto x = random_values(20, 39, 10.0), G = random_values(20, 40);
  std::vector<double> y;
  auto loss = [&] {
    y = x;
    ops().softcap(std::int64_t(y.size()), 3.0, y.data());
    return dot(G, y);
  };
  loss();
  for (std::size_t i = 0; i < x.size(); ++i) BOOST_CHECK_CLOSE(y[i], 3.0 * std::tanh(x[i] / 3.0), 1e-12);
  std::vector<double> dx = G;
  ops().softcap_backward(std::int64_t(x.size()), 3.0, y.data(), dx.data());
  check_gradient("softcap dx", x.data(), x.size(), dx.data(), loss);
}

BOOST_AUTO_TEST_SUITE_END()
