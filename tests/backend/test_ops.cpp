// Every backend op, forward and backward, written once over device buffers and run on
// the backend named by --backend (one ctest entry per backend), compared with the CPU
// backend in f64 as the reference by normalised mean squared error (ggml's
// test-backend-ops): NMSE = Σ(a − b)² / Σb², with a tolerance per dtype (kMaxNmse).
// A backend absent from this build or machine exits 77, which ctest reports as skipped.
//
//   test_backend_ops [boost.test args] -- --backend=cpu-f32|cuda-f32|cpu-bf16|cuda-bf16
//
// Inputs are drawn in f64, rounded to the tested dtype, and given to both backends as
// those rounded values, so that only the op's own rounding is measured.
//
// A bf16 target runs the products (gemm, attention) in f32 ops under bf16 product
// precision (Backend::set_product_precision): the CUDA backend's tensor-core paths (cuBLASLt,
// flash attention), with inputs that bf16 holds exactly. On the CPU, which computes exactly
// either way, the same cases check the harness and the cases themselves.
#define BOOST_TEST_MODULE backend_ops
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "backend/registry.hpp"
#include "tests/backend/backend_target.hpp"
#include "tests/common/arrays.hpp"
#include "core/rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace be = braid::backend;

namespace {


// The largest NMSE against the f64 reference a dtype may show. f32 keeps ~7 digits
// (ε ≈ 6e-8, so ε² ≈ 4e-15 per element); sums over a few hundred terms and the
// recomputed softmax of attention's backward stay below 1e-10. bf16 (ε = 2⁻⁸): the
// probabilities and dS that attention rounds to bf16 on the way to its second product
// leave a relative error of ~2⁻⁹ per term, an NMSE of ~1e-6 to 1e-5; 1e-4 leaves a margin
// and still fails a wrong mask or fragment (NMSE ~1).
double max_nmse(be::DType t) {
  switch (t) {
    case be::DType::f32: return 1e-10;
    case be::DType::bf16: return 1e-4;
    case be::DType::f16: return 1e-6;
    case be::DType::f64: return 1e-24;
  }
  return 0;
}

struct Target {
  std::string name;     // cpu-f32
  be::BackendSpec spec;
  be::DType dtype = be::DType::f32;
};

Target g_target;
be::Backend* g_backend = nullptr;  // under test
be::Backend* g_reference = nullptr;

using Outputs = std::map<std::string, std::vector<double>>;

// ---- device buffers from and to host doubles (through streams and events) -------------

template <typename T>
be::Buffer<T> upload(be::Backend& b, const std::vector<double>& host) {
  be::Buffer<T> buf(b, host.size());
  std::vector<T> typed(host.begin(), host.end());
  if (!typed.empty()) {
    be::OwnedStream copy_stream(b);
    be::OwnedEvent copied(b);
    b.copy_to_device_async(buf.data(), typed.data(), typed.size() * sizeof(T), copy_stream);
    b.record(copied, copy_stream);
    b.wait(b.current_stream(), copied);  // ops on the current stream see the bytes
    b.synchronize(copied);               // and `typed` may go
  }
  return buf;
}

template <typename T>
std::vector<double> download(be::Backend& b, const be::Buffer<T>& buf) {
  std::vector<T> typed(buf.size());
  if (!typed.empty()) {
    b.copy_to_host_async(typed.data(), buf.data(), typed.size() * sizeof(T), b.current_stream());
    b.synchronize(b.current_stream());
  }
  return {typed.begin(), typed.end()};
}

// Values uniform in [lo, hi), rounded to float, or to bf16 for a bf16 target (what the
// tested dtype holds exactly).
std::vector<double> random_values(std::size_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  braid::Rng rng(seed, 17);
  std::vector<double> v(n);
  for (double& x : v) {
    const auto f = static_cast<float>(lo + (hi - lo) * rng.uniform());
    x = g_target.dtype == be::DType::bf16 ? be::bf16_to_float(be::float_to_bf16(f)) : f;
  }
  return v;
}

using braid::test::nmse;
using braid::test::upload_ids;

// One op case: the same body run with T = the tested dtype on the backend under test
// and with T = double on the reference.
// tolerance: the case's own NMSE bound (0: the dtype's, max_nmse).
struct OpCase {
  std::string name;
  be::Op op;
  std::function<Outputs(be::Backend&)> run_f32, run_f64;
  double tolerance = 0;
};

template <typename F>
OpCase op_case(std::string name, be::Op op, F body, double tolerance = 0) {
  return {std::move(name), op, [body](be::Backend& b) { return body.template operator()<float>(b); },
          [body](be::Backend& b) { return body.template operator()<double>(b); }, tolerance};
}

// Runs the case on `backend` (g_backend unless given) and compares with the reference.
void check_case(const OpCase& c, be::Backend* backend = nullptr) {
  be::Backend& b = backend ? *backend : *g_backend;
  BOOST_TEST_CONTEXT("op " << c.name << " on " << g_target.name) {
    // bf16 targets run f32 ops under bf16 product precision.
    const be::DType ops_type = g_target.dtype == be::DType::bf16 ? be::DType::f32 : g_target.dtype;
    if (!b.supports(c.op, ops_type)) {
      BOOST_TEST_MESSAGE(c.name << ": not supported by " << g_target.name << ", skipped");
      return;
    }
    const Outputs ref = c.run_f64(*g_reference);
    Outputs got;
    {
      be::PrecisionScope precision(b, g_target.dtype);
      got = c.run_f32(b);
    }
    BOOST_REQUIRE_EQUAL(ref.size(), got.size());
    const double tol = c.tolerance > 0 ? c.tolerance : max_nmse(g_target.dtype);
    for (const auto& [what, want] : ref) {
      const std::vector<double>& have = got.at(what);
      BOOST_REQUIRE_EQUAL(have.size(), want.size());
      BOOST_TEST(!want.empty());
      bool finite = true;
      for (double x : have) finite = finite && std::isfinite(x);
      BOOST_TEST(finite, what << " has a NaN or Inf");
      if (what == "tokens") {  // a token is right or wrong: no tolerance
        BOOST_TEST(have == want, c.name << ": sampled tokens differ from the reference's");
        continue;
      }
      const double e = nmse(have, want);
      BOOST_TEST_MESSAGE(c.name << " " << what << ": NMSE " << e);
      BOOST_TEST(e <= tol, c.name << " " << what << ": NMSE " << e << " > " << tol);
    }
  }
}

// ---- the cases ------------------------------------------------------------------------

std::vector<OpCase> gemm_cases() {
  std::vector<OpCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::string name = fmt::format("gemm {}{}", ta ? 'T' : 'N', tb ? 'T' : 'N');
      cases.push_back(op_case(name, be::Op::gemm, [ta, tb]<typename T>(be::Backend& b) {
        const std::int64_t m = 13, n = 17, k = 29;
        // Padded leading dimensions, alpha and beta: every argument matters.
        const std::int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
        const auto a = upload<T>(b, random_values(std::size_t((ta ? k : m) * lda), 1));
        const auto bm = upload<T>(b, random_values(std::size_t((tb ? n : k) * ldb), 2));
        auto c = upload<T>(b, random_values(std::size_t(m * ldc), 3));
        b.ops<T>().gemm(ta, tb, m, n, k, T(0.75), a.data(), lda, bm.data(), ldb, T(-0.5), c.data(), ldc);
        return Outputs{{"c", download(b, c)}};
      }));
    }
  }
  return cases;
}

// A product of the shapes the tensor cores tile (and a ragged edge), with bf16 weights or f32
// ones: under bf16 precision both take the tensor cores. Inputs bf16 holds exactly, so the
// products are exact in f32 and only the f32 sums round: an f32 tolerance.
OpCase large_gemm_case(bool bf16_weights, bool ta, bool tb) {
  const std::string name = fmt::format("gemm {}{} 200x136x264{}", ta ? 'T' : 'N', tb ? 'T' : 'N',
                                       bf16_weights ? " (bf16 weights)" : "");
  return op_case(
      name, be::Op::gemm,
      [bf16_weights, ta, tb]<typename T>(be::Backend& b) {
        const std::int64_t m = 200, n = 136, k = 264, lda = ta ? m : k, ldb = tb ? k : n, ldc = n + 4;
        const auto a = upload<T>(b, random_values(std::size_t((ta ? k : m) * lda), 101));
        const std::vector<double> wv = random_values(std::size_t((tb ? n : k) * ldb), 102);
        auto c = upload<T>(b, random_values(std::size_t(m * ldc), 103));
        if constexpr (std::is_same_v<T, float>) {
          if (bf16_weights && b.supports(be::Op::gemm, be::DType::bf16)) {
            std::vector<std::uint16_t> w16(wv.size());
            for (std::size_t i = 0; i < wv.size(); ++i) w16[i] = be::float_to_bf16(float(wv[i]));
            be::Buffer<std::uint16_t> w(b, w16.size());
            b.copy_to_device(w.data(), w16.data(), w16.size() * 2);
            b.ops<T>().gemm(ta, tb, m, n, k, T(1), a.data(), lda, be::Weights(w.data(), be::DType::bf16), ldb, T(1),
                            c.data(), ldc);
            return Outputs{{"c", download(b, c)}};
          }
        }
        const auto w = upload<T>(b, wv);
        b.ops<T>().gemm(ta, tb, m, n, k, T(1), a.data(), lda, w.data(), ldb, T(1), c.data(), ldc);
        return Outputs{{"c", download(b, c)}};
      },
      1e-10);
}

// linear_backward (d_x = d_y·W + β·d_x, d_w += d_yᵀ·x) with f32 or bf16 weights, against the
// reference; and bit for bit equal to the two gemm calls it stands for on the same backend
// (CUDA shares d_y's bf16 rounding between them).
OpCase linear_backward_case(bool bf16_weights) {
  const std::string name = fmt::format("linear backward 96x72x136{}", bf16_weights ? " (bf16 weights)" : "");
  return op_case(
      name, be::Op::gemm,
      [bf16_weights]<typename T>(be::Backend& b) {
        const std::int64_t n = 96, out = 72, in = 136;
        const auto d_y = upload<T>(b, random_values(std::size_t(n * out), 121));
        const auto x = upload<T>(b, random_values(std::size_t(n * in), 122));
        const std::vector<double> wv = random_values(std::size_t(out * in), 123);
        const std::vector<double> dx0 = random_values(std::size_t(n * in), 124), dw0 = random_values(std::size_t(out * in), 125);
        const auto w32 = upload<T>(b, wv);
        be::Buffer<std::uint16_t> w16;
        be::Weights w(w32.data());
        if constexpr (std::is_same_v<T, float>) {
          if (bf16_weights && b.supports(be::Op::gemm, be::DType::bf16)) {
            std::vector<std::uint16_t> h(wv.size());
            for (std::size_t i = 0; i < wv.size(); ++i) h[i] = be::float_to_bf16(float(wv[i]));
            w16 = be::Buffer<std::uint16_t>(b, h.size());
            b.copy_to_device(w16.data(), h.data(), h.size() * 2);
            w = be::Weights(w16.data(), be::DType::bf16);
          }
        }
        auto d_x = upload<T>(b, dx0), d_w = upload<T>(b, dw0);
        b.ops<T>().linear_backward(n, out, in, d_y.data(), w, x.data(), T(1), d_x.data(), d_w.data());
        auto e_x = upload<T>(b, dx0), e_w = upload<T>(b, dw0);
        b.ops<T>().gemm(false, false, n, in, out, T(1), d_y.data(), out, w, in, T(1), e_x.data(), in);
        b.ops<T>().gemm(true, false, out, in, n, T(1), d_y.data(), out, x.data(), in, T(1), e_w.data(), in);
        const std::vector<double> got_x = download(b, d_x), got_w = download(b, d_w);
        BOOST_TEST((got_x == download(b, e_x)), "linear_backward's d_x differs from its two gemm calls'");
        BOOST_TEST((got_w == download(b, e_w)), "linear_backward's d_w differs from its two gemm calls'");
        return Outputs{{"d_x", got_x}, {"d_w", got_w}};
      },
      1e-10);
}

OpCase embedding_case() {
  return op_case("embedding", be::Op::embedding, []<typename T>(be::Backend& b) {
    const std::int64_t vocab = 11, dim = 9;
    const std::vector<std::int32_t> ids{3, 0, 10, 3, 7, 3};  // repeats accumulate in the backward
    const auto n = std::int64_t(ids.size());
    const auto d_ids = upload_ids(b, ids);
    const auto table = upload<T>(b, random_values(std::size_t(vocab * dim), 4));
    be::Buffer<T> out(b, std::size_t(n * dim));
    b.ops<T>().embedding_forward(d_ids.data(), n, table.data(), dim, out.data());
    const auto d_out = upload<T>(b, random_values(std::size_t(n * dim), 5));
    auto d_table = upload<T>(b, random_values(std::size_t(vocab * dim), 6));
    b.ops<T>().embedding_backward(d_ids.data(), n, d_out.data(), dim, d_table.data());
    return Outputs{{"out", download(b, out)}, {"d_table", download(b, d_table)}};
  });
}

OpCase rmsnorm_case() {
  return op_case("rmsnorm", be::Op::rmsnorm, []<typename T>(be::Backend& b) {
    const std::int64_t n = 7, dim = 48;
    const auto x = upload<T>(b, random_values(std::size_t(n * dim), 7, -3, 3));
    const auto w = upload<T>(b, random_values(std::size_t(dim), 8, 0.5, 1.5));
    be::Buffer<T> y(b, std::size_t(n * dim)), rstd(b, std::size_t(n));
    b.ops<T>().rmsnorm_forward(x.data(), w.data(), n, dim, 1e-5, y.data(), rstd.data());
    const auto dy = upload<T>(b, random_values(std::size_t(n * dim), 9));
    auto dx = upload<T>(b, random_values(std::size_t(n * dim), 10));  // accumulated into
    auto dw = upload<T>(b, random_values(std::size_t(dim), 11));
    b.ops<T>().rmsnorm_backward(x.data(), w.data(), rstd.data(), dy.data(), n, dim, dx.data(), dw.data());
    return Outputs{{"y", download(b, y)}, {"rstd", download(b, rstd)}, {"dx", download(b, dx)}, {"dw", download(b, dw)}};
  });
}

// The norms of Qwen3's and Gemma 3's q/k heads: rows of several head vectors inside a wider
// row (a fused q|k|v), Gemma's gain 1 + w, and the backward written in place of dy.
OpCase head_rmsnorm_case() {
  return op_case("rmsnorm of heads, gain 1 + w, backward in place", be::Op::rmsnorm, []<typename T>(be::Backend& b) {
    const std::int64_t n = 5, dim = 16, stride = 3 * 16 + 7;
    const be::NormShape shape{.rows = n, .dim = dim, .groups = 3, .stride = stride, .eps = 1e-6, .weight_offset = 1.0};
    const auto x = upload<T>(b, random_values(std::size_t(n * stride), 30, -3, 3));
    const auto w = upload<T>(b, random_values(std::size_t(dim), 31, -0.5, 0.5));
    auto y = upload<T>(b, random_values(std::size_t(n * stride), 32));  // columns past the heads keep these
    be::Buffer<T> rstd(b, std::size_t(n * 3));
    b.ops<T>().rmsnorm_forward(x.data(), w.data(), shape, y.data(), rstd.data());
    auto d = upload<T>(b, random_values(std::size_t(n * stride), 33));
    auto dw = upload<T>(b, random_values(std::size_t(dim), 34));
    be::NormShape in_place = shape;
    in_place.accumulate = false;
    b.ops<T>().rmsnorm_backward(x.data(), w.data(), rstd.data(), d.data(), in_place, d.data(), dw.data());
    return Outputs{{"y", download(b, y)}, {"rstd", download(b, rstd)}, {"dx", download(b, d)}, {"dw", download(b, dw)}};
  });
}

OpCase rope_case() {
  return op_case("rope", be::Op::rope, []<typename T>(be::Backend& b) {
    const std::int64_t n = 5;
    const int heads = 3, hd = 8, half = hd / 2, max_pos = 16;
    const std::int64_t stride = heads * hd + 4;  // a row wider than its heads (q of a fused qkv)
    std::vector<double> cs(max_pos * half), sn(max_pos * half);
    for (int p = 0; p < max_pos; ++p) {
      for (int j = 0; j < half; ++j) {
        const double angle = p * std::pow(10000.0, -2.0 * j / hd);
        cs[std::size_t(p * half + j)] = static_cast<float>(std::cos(angle));
        sn[std::size_t(p * half + j)] = static_cast<float>(std::sin(angle));
      }
    }
    const auto d_pos = upload_ids(b, {0, 5, 15, 2, 9});
    const auto d_cos = upload<T>(b, cs), d_sin = upload<T>(b, sn);
    auto x = upload<T>(b, random_values(std::size_t(n * stride), 12));
    b.ops<T>().rope(x.data(), n, stride, heads, hd, d_pos.data(), d_cos.data(), d_sin.data(), false);
    Outputs out{{"forward", download(b, x)}};
    auto g = upload<T>(b, random_values(std::size_t(n * stride), 13));
    b.ops<T>().rope(g.data(), n, stride, heads, hd, d_pos.data(), d_cos.data(), d_sin.data(), true);
    out["inverse"] = download(b, g);
    return out;
  });
}

// Gemma's attention options: a scale of its own (query_pre_attn_scalar), soft-capped scores
// (attn_logit_softcapping), and a sliding window (Mistral, Qwen2, Gemma's local layers).
struct ScoreOptions {
  double scale = 0, softcap = 0;
  std::int64_t window = 0;
  std::string name() const {
    std::string n;
    if (scale > 0) n += fmt::format(", scale {}", scale);
    if (softcap > 0) n += fmt::format(", soft-cap {}", softcap);
    if (window > 0) n += fmt::format(", window {}", window);
    return n;
  }
};

OpCase attention_case(int n_heads, int n_kv_heads, ScoreOptions opt = {}) {
  const std::string name = fmt::format("attention {} heads / {} kv heads{}", n_heads, n_kv_heads, opt.name());
  return op_case(name, be::Op::attention, [n_heads, n_kv_heads, opt]<typename T>(be::Backend& b) {
    const int hd = 8;
    be::AttentionDims dims{.n_heads = n_heads, .n_kv_heads = n_kv_heads, .head_dim = hd,
                           .q_stride = n_heads * hd + 2, .kv_stride = n_kv_heads * hd + 1,
                           .scale = opt.scale, .softcap = opt.softcap, .window = opt.window};
    // Three segments: a prompt alone, one with keys before it (a continuation in a
    // cache slot that starts at row 20), and a single decode row.
    const std::vector<be::AttentionSegment> segs{
        {.q_begin = 0, .q_len = 6, .kv_begin = 0, .past = 0},
        {.q_begin = 6, .q_len = 4, .kv_begin = 20, .past = 5},
        {.q_begin = 10, .q_len = 1, .kv_begin = 40, .past = 7},
    };
    const std::int64_t q_rows = 11, kv_rows = 48;
    const auto q = upload<T>(b, random_values(std::size_t(q_rows * dims.q_stride), 14, -2, 2));
    const auto k = upload<T>(b, random_values(std::size_t(kv_rows * dims.kv_stride), 15, -2, 2));
    const auto v = upload<T>(b, random_values(std::size_t(kv_rows * dims.kv_stride), 16));
    be::Buffer<T> out(b, std::size_t(q_rows * n_heads * hd)), lse(b, std::size_t(q_rows * n_heads));
    b.ops<T>().attention_forward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data());
    const auto d_out = upload<T>(b, random_values(std::size_t(q_rows * n_heads * hd), 17));
    be::Buffer<T> d_q(b, std::size_t(q_rows * dims.q_stride));
    auto d_k = upload<T>(b, random_values(std::size_t(kv_rows * dims.kv_stride), 18));  // accumulated into
    auto d_v = upload<T>(b, random_values(std::size_t(kv_rows * dims.kv_stride), 19));
    b.ops<T>().attention_backward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data(), d_out.data(),
                                  d_q.data(), d_k.data(), d_v.data());
    // d_q rows are q_stride wide; only the heads' columns are written.
    std::vector<double> dq = download(b, d_q), dq_heads;
    for (std::int64_t r = 0; r < q_rows; ++r) {
      for (std::int64_t j = 0; j < n_heads * hd; ++j) dq_heads.push_back(dq[std::size_t(r * dims.q_stride + j)]);
    }
    return Outputs{{"out", download(b, out)}, {"lse", download(b, lse)}, {"d_q", dq_heads},
                   {"d_k", download(b, d_k)},  {"d_v", download(b, d_v)}};
  });
}

// Attention of the shapes the tensor-core kernels take (head_dim 64 or 128): packed segments
// whose lengths are not multiples of the 64-row tiles (1, 63, 65, 130), one with keys before
// it in a slot elsewhere in k and v (past 37), grouped-query heads, strides wider than the
// heads (q, k, v inside one fused row, as the model has them). `past` places the
// continuation's last key or first query on a tile edge for some values (17, 49). NMSE
// bound 1e-5: the kernels' own rounding gives 0.4-1.1e-6 on an H200, and the lane-level
// simulation (flash_attention_sim.py) shows a tile skipped or kept by one too many at
// 1.2e-5 and above.
OpCase flash_attention_case(int n_heads, int n_kv_heads, int hd, std::int64_t past = 37, ScoreOptions opt = {}) {
  const std::string name = fmt::format("attention {} heads / {} kv heads of {}, packed (past {}){}", n_heads, n_kv_heads,
                                       hd, past, opt.name());
  return op_case(name, be::Op::attention, [n_heads, n_kv_heads, hd, past, opt]<typename T>(be::Backend& b) {
    const std::int64_t qkv = std::int64_t(n_heads + 2 * n_kv_heads) * hd;  // one fused row: q | k | v
    be::AttentionDims dims{.n_heads = n_heads, .n_kv_heads = n_kv_heads, .head_dim = hd, .q_stride = qkv,
                           .kv_stride = qkv, .scale = opt.scale, .softcap = opt.softcap, .window = opt.window};
    const std::vector<std::int64_t> lens{65, 1, 130, 63};
    std::vector<be::AttentionSegment> segs;
    std::int64_t rows = 0;
    for (std::int64_t len : lens) {
      segs.push_back({.q_begin = rows, .q_len = len, .kv_begin = rows, .past = 0});
      rows += len;
    }
    // A continuation: 20 queries after `past` keys, its keys in rows [rows + 20, rows + 40 + past).
    segs.push_back({.q_begin = rows, .q_len = 20, .kv_begin = rows + 20, .past = past});
    const std::int64_t total = rows + 40 + past;
    const auto x = upload<T>(b, random_values(std::size_t(total * qkv), 110, -2, 2));
    const T* q = x.data();
    const T* k = q + std::int64_t(n_heads) * hd;
    const T* v = k + std::int64_t(n_kv_heads) * hd;
    const std::int64_t q_rows = rows + 20, width = std::int64_t(n_heads) * hd;
    be::Buffer<T> out(b, std::size_t(q_rows * width)), lse(b, std::size_t(q_rows * n_heads));
    b.ops<T>().attention_forward(dims, segs, q, k, v, out.data(), lse.data());
    const auto d_out = upload<T>(b, random_values(std::size_t(q_rows * width), 111));
    auto d_x = upload<T>(b, random_values(std::size_t(total * qkv), 112));  // d_k, d_v accumulate into it
    b.ops<T>().attention_backward(dims, segs, q, k, v, out.data(), lse.data(), d_out.data(), d_x.data(),
                                  d_x.data() + std::int64_t(n_heads) * hd,
                                  d_x.data() + std::int64_t(n_heads + n_kv_heads) * hd);
    // d_q is written on the query rows' q columns; every other column keeps its start value
    // plus what d_k, d_v added: all of d_x is compared.
    return Outputs{{"out", download(b, out)}, {"lse", download(b, lse)}, {"d_qkv", download(b, d_x)}};
  }, 1e-5);
}

// The gated activations: SwiGLU (Llama) and GeGLU (Gemma's tanh GELU).
OpCase gated_case(bool geglu) {
  return op_case(geglu ? "geglu" : "swiglu", be::Op::swiglu, [geglu]<typename T>(be::Backend& b) {
    const std::int64_t n = 6, inter = 40;
    const auto gu = upload<T>(b, random_values(std::size_t(n * 2 * inter), geglu ? 27 : 20, -4, 4));
    be::Buffer<T> out(b, std::size_t(n * inter)), d_gu(b, std::size_t(n * 2 * inter));
    const auto d_out = upload<T>(b, random_values(std::size_t(n * inter), geglu ? 28 : 21));
    if (geglu) {
      b.ops<T>().geglu_forward(gu.data(), n, inter, out.data());
      b.ops<T>().geglu_backward(gu.data(), d_out.data(), n, inter, d_gu.data());
    } else {
      b.ops<T>().swiglu_forward(gu.data(), n, inter, out.data());
      b.ops<T>().swiglu_backward(gu.data(), d_out.data(), n, inter, d_gu.data());
    }
    return Outputs{{"out", download(b, out)}, {"d_gate_up", download(b, d_gu)}};
  });
}

// Soft-capping (Gemma's final logits) over values well inside and well past the cap.
OpCase softcap_case() {
  return op_case("softcap", be::Op::elementwise, []<typename T>(be::Backend& b) {
    const std::int64_t n = 1000;
    auto x = upload<T>(b, random_values(std::size_t(n), 35, -40, 40));
    b.ops<T>().softcap(n, 15.0, x.data());
    auto d = upload<T>(b, random_values(std::size_t(n), 36));
    b.ops<T>().softcap_backward(n, 15.0, x.data(), d.data());
    return Outputs{{"capped", download(b, x)}, {"d", download(b, d)}};
  });
}

// Inverted dropout (LoRA's): the same elements kept on every backend (the draw is keyed by
// the row's key and the column, col0 shifting the columns), the kept ones scaled by 1/(1 − p),
// in place as well as out of place. A different mask would leave an NMSE of about p.
OpCase dropout_case() {
  return op_case("dropout", be::Op::elementwise, []<typename T>(be::Backend& b) {
    const std::int64_t rows = 37, cols = 300;
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < keys.size(); ++r) keys[r] = 0x5eed0000ull + 7 * r;
    be::Buffer<std::uint64_t> dkeys(b, keys.size());
    b.copy_to_device(dkeys.data(), keys.data(), keys.size() * sizeof(std::uint64_t));
    auto x = upload<T>(b, random_values(std::size_t(rows * cols), 37));
    be::Buffer<T> out(b, std::size_t(rows * cols));
    b.ops<T>().dropout(rows, cols, x.data(), dkeys.data(), 5, 99, 0.3, out.data());
    b.ops<T>().dropout(rows, cols, x.data(), dkeys.data(), 0, 7, 0.5, x.data());
    return Outputs{{"out", download(b, out)}, {"in place", download(b, x)}};
  });
}

OpCase elementwise_case() {
  return op_case("axpy, scale, sum_squares", be::Op::elementwise, []<typename T>(be::Backend& b) {
    // Larger than the CPU's parallel grain (2^15), so several chunks are summed.
    const std::int64_t n = 100003;
    const auto x = upload<T>(b, random_values(std::size_t(n), 22));
    auto y = upload<T>(b, random_values(std::size_t(n), 23));
    b.ops<T>().axpy(n, T(-1.25), x.data(), y.data());
    Outputs out{{"axpy", download(b, y)}};
    b.ops<T>().scale(n, T(0.3), y.data());
    out["scale"] = download(b, y);
    out["sum_squares"] = {b.ops<T>().sum_squares(n, y.data())};
    return out;
  });
}

OpCase softmax_stats_case() {
  return op_case("softmax_stats", be::Op::softmax_stats, []<typename T>(be::Backend& b) {
    const std::int64_t rows = 5, vocab = 300;
    const auto targets = upload_ids(b, {0, 299, 17, 17, 150});
    auto logits = upload<T>(b, random_values(std::size_t(rows * vocab), 24, -6, 6));
    be::Buffer<T> lse(b, std::size_t(rows)), logprob(b, std::size_t(rows)), entropy(b, std::size_t(rows));
    b.ops<T>().softmax_stats(logits.data(), rows, vocab, targets.data(), lse.data(), logprob.data(), entropy.data());
    Outputs out{{"lse", download(b, lse)}, {"logprob", download(b, logprob)}, {"entropy", download(b, entropy)}};
    const auto d_logprob = upload<T>(b, random_values(std::size_t(rows), 25));
    const auto d_entropy = upload<T>(b, random_values(std::size_t(rows), 26));
    b.ops<T>().softmax_stats_backward(logits.data(), rows, vocab, targets.data(), lse.data(), entropy.data(),
                                      d_logprob.data(), d_entropy.data());
    out["d_logits"] = download(b, logits);
    return out;
  });
}

// AdamW against the reference; and, with f32 masters, adamw_with_copy bit for bit equal to
// adamw then convert to bf16 (CUDA does both in one pass), on aligned arrays of a length
// that is not a multiple of 4 (vector loads and a scalar tail) and on arrays one element
// off alignment (scalar loads only).
OpCase adamw_case() {
  return op_case("adamw", be::Op::adamw, []<typename T>(be::Backend& b) {
    const std::int64_t n = 1003;
    const std::vector<double> w0 = random_values(std::size_t(n), 27), m0 = random_values(std::size_t(n), 29, -0.1, 0.1),
                              v0 = random_values(std::size_t(n), 30, 0.0, 0.01);
    auto w = upload<T>(b, w0), m = upload<T>(b, m0), v = upload<T>(b, v0);
    const auto g = upload<T>(b, random_values(std::size_t(n), 28));
    const be::AdamWStep s{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                          .grad_scale = 0.5f, .step = 3};
    b.ops<T>().adamw(n, w.data(), g.data(), m.data(), v.data(), s);
    Outputs out{{"w", download(b, w)}, {"m", download(b, m)}, {"v", download(b, v)}};
    if constexpr (std::is_same_v<T, float>) {
      for (const std::int64_t off : {0, 1}) {
        const std::int64_t k = n - off;
        auto wc = upload<T>(b, w0), mc = upload<T>(b, m0), vc = upload<T>(b, v0);
        be::Buffer<std::uint16_t> copy(b, std::size_t(n)), expect(b, std::size_t(n));
        b.ops<T>().adamw_with_copy(k, wc.data() + off, g.data() + off, mc.data() + off, vc.data() + off, s,
                                   copy.data() + off, be::DType::bf16);
        auto we = upload<T>(b, w0), me = upload<T>(b, m0), ve = upload<T>(b, v0);
        b.ops<T>().adamw(k, we.data() + off, g.data() + off, me.data() + off, ve.data() + off, s);
        b.ops<T>().convert(k, we.data() + off, be::DType::f32, expect.data() + off, be::DType::bf16);
        const std::string where = fmt::format("adamw_with_copy at offset {}", off);
        BOOST_TEST((download(b, wc) == download(b, we)), where << ": w differs from adamw's");
        BOOST_TEST((download(b, mc) == download(b, me)), where << ": m differs from adamw's");
        BOOST_TEST((download(b, vc) == download(b, ve)), where << ": v differs from adamw's");
        std::vector<std::uint16_t> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
        b.copy_to_host(got.data(), copy.data(), got.size() * 2);
        b.copy_to_host(want.data(), expect.data(), want.size() * 2);
        BOOST_TEST(std::equal(got.begin() + off, got.end(), want.begin() + off),
                   where << ": the bf16 copy differs from convert's");
      }
    }
    return out;
  });
}

OpCase sample_case(std::string name, be::SamplingSpec spec) {
  return op_case("sample " + name, be::Op::sample, [spec]<typename T>(be::Backend& b) {
    const std::int64_t rows = 9, vocab = 257;
    // Peaked rows, so that the top-p nucleus holds a few tokens and not the vocabulary.
    const auto logits = upload<T>(b, random_values(std::size_t(rows * vocab), 31, -8, 8));
    std::vector<double> u = random_values(std::size_t(rows), 32, 0, 1);
    const auto uniforms = upload<double>(b, u);
    be::Buffer<std::int32_t> tokens(b, std::size_t(rows));
    be::Buffer<T> logprob(b, std::size_t(rows)), raw(b, std::size_t(rows));
    b.ops<T>().sample(logits.data(), rows, vocab, spec, uniforms.data(), tokens.data(), logprob.data(), raw.data());
    Outputs out{{"tokens", download(b, tokens)}, {"raw_logprob", download(b, raw)}};
    if (!spec.greedy()) out["logprob"] = download(b, logprob);  // all 0 when greedy
    return out;
  });
}

OpCase global_sum_squares_case() {
  return op_case("global_sum_squares", be::Op::global_sum_squares, []<typename T>(be::Backend& b) {
    const std::vector<std::size_t> sizes{1, 300, 70000, 17};
    std::vector<be::Buffer<T>> bufs;
    for (std::size_t i = 0; i < sizes.size(); ++i) bufs.push_back(upload<T>(b, random_values(sizes[i], 40 + i)));
    std::vector<std::span<const T>> spans;
    for (const auto& x : bufs) spans.emplace_back(x.data(), x.size());
    const double all = b.ops<T>().global_sum_squares(spans);
    const double none = b.ops<T>().global_sum_squares({});
    // A part of the list: the second tensor alone.
    const double one = b.ops<T>().global_sum_squares(std::span(spans).subspan(1, 1));
    return Outputs{{"all", {all}}, {"one", {one}}, {"none+1", {none + 1.0}}};
  });
}

// The RL losses (backend/losses.hpp): every returned sum and every gradient row. Rows
// with weight 0 (prompt positions) are mixed in; ratios stay inside the clip range for
// some rows and outside for others, so both branches run.
// sequence_ratio: every row's log ρ given (GSPO's per-sequence mean), not logprob − old.
OpCase policy_loss_case(std::string name, be::PolicyLossOptions opt, bool sequence_ratio = false) {
  return op_case("policy_loss " + name, be::Op::losses, [opt, sequence_ratio]<typename T>(be::Backend& b) {
    const std::int64_t n = 300;
    std::vector<double> w = random_values(std::size_t(n), 50, 0, 1);
    for (std::size_t i = 0; i < w.size(); i += 7) w[i] = 0;
    const auto old = random_values(std::size_t(n), 51, -4, -0.1);
    std::vector<double> lp = old;
    const auto shift = random_values(std::size_t(n), 52, -0.5, 0.5);
    for (std::size_t i = 0; i < lp.size(); ++i) lp[i] = static_cast<float>(lp[i] + shift[i]);
    const auto logprob = upload<T>(b, lp), old_lp = upload<T>(b, old), weight = upload<T>(b, w);
    const auto adv = upload<T>(b, random_values(std::size_t(n), 53, -2, 2));
    const auto entropy = upload<T>(b, random_values(std::size_t(n), 54, 0, 3));
    const auto ref = upload<T>(b, random_values(std::size_t(n), 55, -4, -0.1));
    const auto log_ratio = upload<T>(b, random_values(std::size_t(n), 56, -0.4, 0.4));
    be::Buffer<T> d_lp(b, std::size_t(n)), d_ent(b, std::size_t(n));
    const be::PolicyLossSums r = b.ops<T>().policy_loss(
        n, {logprob.data(), old_lp.data(), adv.data(), weight.data(), entropy.data(), ref.data(),
            sequence_ratio ? log_ratio.data() : nullptr},
        opt, 0.25, d_lp.data(), opt.entropy_coef != 0 ? d_ent.data() : nullptr);
    Outputs out{{"d_logprob", download(b, d_lp)},
                {"sums", {r.loss, r.policy_loss, r.weight, r.clipped, r.approx_kl, r.entropy, r.ratio_max}}};
    if (opt.kl_coef != 0) out["kl_ref"] = {r.kl_ref};
    if (opt.entropy_coef != 0) out["d_entropy"] = download(b, d_ent);
    return out;
  });
}

OpCase value_loss_case(double clip) {
  return op_case(fmt::format("value_loss clip {}", clip), be::Op::losses, [clip]<typename T>(be::Backend& b) {
    const std::int64_t n = 300;
    std::vector<double> w = random_values(std::size_t(n), 60, 0, 1);
    for (std::size_t i = 0; i < w.size(); i += 5) w[i] = 0;
    const auto values = upload<T>(b, random_values(std::size_t(n), 61, -1, 1));
    const auto old = upload<T>(b, random_values(std::size_t(n), 62, -1, 1));
    const auto ret = upload<T>(b, random_values(std::size_t(n), 63, -1, 1));
    const auto weight = upload<T>(b, w);
    be::Buffer<T> d(b, std::size_t(n));
    const be::ValueLossSums r =
        b.ops<T>().value_loss(n, {values.data(), old.data(), ret.data(), weight.data()}, clip, 0.5, d.data());
    return Outputs{{"d_values", download(b, d)}, {"sums", {r.loss, r.weight, r.clipped, r.error}}};
  });
}

OpCase pairwise_and_nll_case() {
  return op_case("pairwise_loss, nll_loss", be::Op::losses, []<typename T>(be::Backend& b) {
    const std::int64_t rows = 64, pairs = 20;
    const auto values = upload<T>(b, random_values(std::size_t(rows), 70, -2, 2));
    std::vector<std::int64_t> chosen(pairs), rejected(pairs);
    for (std::int64_t p = 0; p < pairs; ++p) chosen[std::size_t(p)] = 3 * p, rejected[std::size_t(p)] = 3 * p + 1;
    be::Buffer<std::int64_t> c(b, std::size_t(pairs)), r(b, std::size_t(pairs));
    b.copy_to_device(c.data(), chosen.data(), chosen.size() * sizeof(std::int64_t));
    b.copy_to_device(r.data(), rejected.data(), rejected.size() * sizeof(std::int64_t));
    be::Buffer<T> d(b, std::size_t(rows));
    const be::PairwiseLossSums pw = b.ops<T>().pairwise_loss(pairs, values.data(), c.data(), r.data(), 0.1, d.data());
    const auto lp = upload<T>(b, random_values(std::size_t(rows), 71, -5, 0));
    const auto w = upload<T>(b, random_values(std::size_t(rows), 72, 0, 1));
    be::Buffer<T> d_lp(b, std::size_t(rows));
    const double nll = b.ops<T>().nll_loss(rows, lp.data(), w.data(), 0.01, d_lp.data());
    return Outputs{{"d_values", download(b, d)},
                   {"pairwise sums", {pw.loss, pw.correct, pw.margin}},
                   {"d_logprob", download(b, d_lp)},
                   {"nll", {nll}}};
  });
}

// Pairs of sequences of uneven lengths with zero-weight prompt rows; weights 1 or 1/len.
OpCase dpo_loss_case(be::DpoLoss loss, bool length_normalize) {
  const std::string name = fmt::format("dpo_loss {}{}", loss == be::DpoLoss::sigmoid ? "sigmoid" : "ipo",
                                       length_normalize ? " length-normalised" : "");
  return op_case(name, be::Op::losses, [loss, length_normalize]<typename T>(be::Backend& b) {
    const std::int64_t pairs = 12;
    std::vector<std::int64_t> offsets{0};
    std::vector<double> w;
    braid::Rng rng(90);
    for (std::int64_t s = 0; s < 2 * pairs; ++s) {
      const std::int64_t prompt = 1 + std::int64_t(rng.below(4)), response = 1 + std::int64_t(rng.below(9));
      for (std::int64_t r = 0; r < prompt + response; ++r) {
        // Row r produces token r + 1: the response rows are prompt − 1 .. prompt + response − 2.
        const bool counted = r >= prompt - 1 && r < prompt + response - 1;
        w.push_back(static_cast<float>(counted ? (length_normalize ? 1.0 / double(response) : 1.0) : 0.0));
      }
      offsets.push_back(std::int64_t(w.size()));
    }
    const auto n = w.size();
    const auto logprob = upload<T>(b, random_values(n, 91, -4, -0.1));
    const auto ref = upload<T>(b, random_values(n, 92, -4, -0.1));
    const auto weight = upload<T>(b, w);
    be::Buffer<std::int64_t> rows(b, offsets.size());
    b.copy_to_device(rows.data(), offsets.data(), offsets.size() * sizeof(std::int64_t));
    be::Buffer<T> d(b, n);
    const be::DpoLossSums r = b.ops<T>().dpo_loss(
        pairs, {logprob.data(), ref.data(), weight.data(), rows.data()}, {.loss = loss, .beta = 0.3}, 0.125, d.data());
    return Outputs{{"d_logprob", download(b, d)},
                   {"sums", {r.loss, r.correct, r.margin, r.reward_chosen, r.reward_rejected, r.logp_chosen,
                             r.logp_rejected, r.logp_correct}}};
  });
}

OpCase whiten_case() {
  return op_case("whiten", be::Op::losses, []<typename T>(be::Backend& b) {
    const std::int64_t n = 500;
    auto x = upload<T>(b, random_values(std::size_t(n), 80, -3, 5));
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 4 != 0;  // every fourth row untouched
    be::Buffer<std::uint8_t> m(b, mask.size());
    b.copy_to_device(m.data(), mask.data(), mask.size());
    const be::WhiteningStats s = b.ops<T>().whiten(n, x.data(), m.data(), 1e-8);
    return Outputs{{"x", download(b, x)}, {"stats", {s.mean, s.std, double(s.count)}}};
  });
}

// What a bf16 target checks: the products, which bf16 precision changes.
std::vector<OpCase> bf16_cases() {
  std::vector<OpCase> cases = gemm_cases();
  for (bool w16 : {false, true}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) cases.push_back(large_gemm_case(w16, ta, tb));
    }
    cases.push_back(linear_backward_case(w16));
  }
  cases.push_back(attention_case(4, 2));  // head_dim 8: the exact kernels under bf16 precision
  cases.push_back(flash_attention_case(8, 2, 64));
  cases.push_back(flash_attention_case(4, 4, 128));
  cases.push_back(flash_attention_case(6, 1, 64));
  cases.push_back(flash_attention_case(4, 1, 64, 49));
  cases.push_back(flash_attention_case(2, 1, 128, 17));
  // Gemma's options through the tensor-core kernels: a window reaching back into the tile
  // before (and past a continuation's keys), and a soft-cap with its own scale.
  cases.push_back(flash_attention_case(4, 2, 64, 37, {.window = 40}));
  cases.push_back(flash_attention_case(2, 1, 128, 49, {.window = 70}));
  cases.push_back(flash_attention_case(4, 2, 64, 17, {.scale = 0.05, .softcap = 10.0}));
  cases.push_back(flash_attention_case(4, 1, 128, 37, {.scale = 0.1, .softcap = 8.0, .window = 64}));
  return cases;
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases = gemm_cases();
  cases.push_back(linear_backward_case(false));
  cases.push_back(embedding_case());
  cases.push_back(rmsnorm_case());
  cases.push_back(rope_case());
  cases.push_back(attention_case(4, 4));
  cases.push_back(attention_case(4, 2));  // grouped-query
  cases.push_back(attention_case(6, 1));  // multi-query
  cases.push_back(attention_case(4, 2, {.window = 3}));
  cases.push_back(attention_case(4, 2, {.scale = 0.6, .softcap = 2.0}));
  cases.push_back(attention_case(6, 2, {.scale = 0.4, .softcap = 1.5, .window = 5}));
  cases.push_back(head_rmsnorm_case());
  cases.push_back(gated_case(false));
  cases.push_back(gated_case(true));
  cases.push_back(softcap_case());
  cases.push_back(dropout_case());
  cases.push_back(elementwise_case());
  cases.push_back(softmax_stats_case());
  cases.push_back(adamw_case());
  cases.push_back(sample_case("greedy", {.temperature = 0.0}));
  cases.push_back(sample_case("temperature 0.7", {.temperature = 0.7}));
  cases.push_back(sample_case("top-k 5", {.temperature = 1.0, .top_k = 5}));
  cases.push_back(sample_case("top-p 0.8", {.temperature = 1.3, .top_p = 0.8}));
  cases.push_back(sample_case("top-k 40 top-p 0.5", {.temperature = 0.9, .top_k = 40, .top_p = 0.5}));
  cases.push_back(global_sum_squares_case());
  cases.push_back(policy_loss_case("ppo", {.clip_low = 0.2, .clip_high = 0.28, .entropy_coef = 0.01}));
  cases.push_back(policy_loss_case("grpo", {.clip_low = 0.2, .clip_high = 0.2, .kl_coef = 0.04}));
  cases.push_back(policy_loss_case("k1", {.kl_coef = 0.1, .kl_estimator = be::KlEstimator::k1}));
  cases.push_back(policy_loss_case("k2", {.kl_coef = 0.1, .kl_estimator = be::KlEstimator::k2}));
  cases.push_back(policy_loss_case("gspo", {.clip_low = 0.2, .clip_high = 0.3, .kl_coef = 0.04}, true));
  cases.push_back(value_loss_case(0.2));
  cases.push_back(value_loss_case(0.0));
  cases.push_back(pairwise_and_nll_case());
  cases.push_back(dpo_loss_case(be::DpoLoss::sigmoid, false));
  cases.push_back(dpo_loss_case(be::DpoLoss::ipo, false));
  cases.push_back(dpo_loss_case(be::DpoLoss::sigmoid, true));
  cases.push_back(whiten_case());
  return cases;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_against_reference)

BOOST_AUTO_TEST_CASE(every_op) {
  if (g_target.dtype == be::DType::bf16) {
    const auto cases = bf16_cases();
    for (const OpCase& c : cases) check_case(c);
    return;
  }
  const auto cases = all_cases();
  BOOST_TEST(cases.size() >= 20u);
  for (const OpCase& c : cases) check_case(c);
}

// The fallbacks a GPU session can choose by environment (docs/gpu.md), each on a backend of
// its own made after setting the variable: BRAID_CUDA_ATTENTION=exact gives the exact kernels
// under bf16 precision (f32 tolerance), and every BRAID_CUDA_GEMM path gives the products.
BOOST_AUTO_TEST_CASE(environment_fallbacks) {
  if (g_target.dtype != be::DType::bf16) return;
  struct Setting {
    const char* variable;
    const char* value;
    std::vector<OpCase> cases;
  };
  std::vector<Setting> settings;
  {
    OpCase exact = flash_attention_case(8, 2, 64);
    exact.tolerance = max_nmse(be::DType::f32);
    settings.push_back({"BRAID_CUDA_ATTENTION", "exact", {exact}});
  }
  for (const char* path : {"gemmex", "fast16bf", "lt"}) {
    std::vector<OpCase> products;
    for (bool w16 : {false, true}) products.push_back(large_gemm_case(w16, false, true));
    products.push_back(large_gemm_case(false, true, false));  // a weight gradient's shape
    products.push_back(linear_backward_case(true));
    settings.push_back({"BRAID_CUDA_GEMM", path, products});
  }
  for (const Setting& s : settings) {
    BOOST_TEST_CONTEXT(s.variable << "=" << s.value) {
      ::setenv(s.variable, s.value, 1);
      auto backend = be::make_backend(be::BackendSpec{g_target.spec.kind, g_target.spec.device, 2});
      ::unsetenv(s.variable);
      for (const OpCase& c : s.cases) check_case(c, backend.get());
    }
  }
  // A value no path has is refused, naming the variable.
  ::setenv("BRAID_CUDA_GEMM", "fastest", 1);
  bool named = true;
  try {
    auto backend = be::make_backend(be::BackendSpec{g_target.spec.kind, g_target.spec.device, 2});
    named = backend->name().rfind("cuda", 0) != 0;  // only CUDA reads it
  } catch (const std::exception& e) {
    named = std::string(e.what()).find("BRAID_CUDA_GEMM") != std::string::npos;
  }
  ::unsetenv("BRAID_CUDA_GEMM");
  BOOST_TEST(named);
}

// The harness itself: a wrong result must show up as a large NMSE.
BOOST_AUTO_TEST_CASE(nmse_sees_an_error) {
  BOOST_TEST(nmse({1, 2, 3}, {1, 2, 3}) == 0.0);
  BOOST_TEST(nmse({1, 2, 3.1}, {1, 2, 3}) > max_nmse(be::DType::bf16));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(streams_and_events)

// Work ordered across two streams by an event, with async copies both ways.
BOOST_AUTO_TEST_CASE(event_orders_streams) {
  be::Backend& b = *g_backend;
  const std::int64_t n = 4096;
  std::vector<float> host_x(n), host_y(n, 1.0f), result(n, 0.0f);
  for (std::int64_t i = 0; i < n; ++i) host_x[std::size_t(i)] = float(i % 13);
  be::Buffer<float> x(b, std::size_t(n)), y(b, std::size_t(n));
  be::OwnedStream upload_stream(b), compute(b);
  be::OwnedEvent uploaded(b), done(b);
  b.copy_to_device_async(x.data(), host_x.data(), n * sizeof(float), upload_stream);
  b.copy_to_device_async(y.data(), host_y.data(), n * sizeof(float), upload_stream);
  b.record(uploaded, upload_stream);
  b.wait(compute, uploaded);
  {
    be::StreamScope on(b, compute);
    BOOST_TEST((b.current_stream() == compute.get()));
    b.ops<float>().axpy(n, 2.0f, x.data(), y.data());
    b.copy_to_host_async(result.data(), y.data(), n * sizeof(float), compute);
    b.record(done, compute);
  }
  BOOST_TEST((b.current_stream() == b.default_stream()));
  b.synchronize(done);
  BOOST_TEST(b.query(done));
  for (std::int64_t i = 0; i < n; ++i) BOOST_REQUIRE_EQUAL(result[std::size_t(i)], 1.0f + 2.0f * float(i % 13));
  b.synchronize(compute.get());
  b.synchronize();
}

BOOST_AUTO_TEST_CASE(streams_are_distinct_and_checked) {
  be::Backend& b = *g_backend;
  be::OwnedStream s1(b), s2(b);
  BOOST_TEST((s1.get() != s2.get()));
  BOOST_TEST((s1.get() != b.default_stream()));
  BOOST_CHECK_THROW(b.destroy_stream(b.default_stream()), std::logic_error);
  const be::Stream gone = b.create_stream();
  b.destroy_stream(gone);
  BOOST_CHECK_THROW(b.set_stream(gone), std::logic_error);
  const be::Event e = b.create_event();
  BOOST_TEST(b.query(e));  // never recorded: nothing to wait for
  b.destroy_event(e);
  BOOST_CHECK_THROW(b.destroy_event(e), std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) {
  const auto target = braid::test::parse_backend_target(argc, argv, "cpu-f32", "test_backend_ops",
                                                        "cpu-f32, cuda-f32, cpu-bf16, cuda-bf16");
  if (!target) return 2;
  g_target = {target->name, target->spec, target->dtype};
  if (target->dtype != be::DType::f32 && target->dtype != be::DType::bf16) {
    std::cerr << "test_backend_ops: f32 and bf16 targets have cases, not " << target->name << "\n";
    return 2;
  }
  auto backend = braid::test::make_or_skip(*target);
  if (!backend) return braid::test::kSkip;
  auto reference = be::make_cpu_backend(2);
  g_backend = backend.get();
  g_reference = reference.get();
  auto args = target->boost_args;
  return boost::unit_test::unit_test_main(&::init_unit_test, static_cast<int>(args.size()), args.data());
}
