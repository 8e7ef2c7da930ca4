#define BOOST_TEST_MODULE rl
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "rl/chunked_lm_head.hpp"

#include <cmath>
#include <vector>

using namespace braid;

namespace {

std::vector<float> values(std::size_t n, unsigned seed, float scale) {
  std::vector<float> v(n);
  std::uint32_t s = 2654435761u * (seed + 1);
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (float(s >> 8) / float(1u << 24) * 2.0f - 1.0f);
  }
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(chunked_head_matches_full_logits_for_any_chunk_size) {
  auto be = backend::make_cpu_backend(1);
  const std::int64_t rows = 13, D = 16, V = 37;
  const auto h = values(rows * D, 1, 1.0f), W = values(V * D, 2, 0.5f);
  std::vector<std::int32_t> t(rows);
  for (std::int64_t r = 0; r < rows; ++r) t[std::size_t(r)] = r % 5 == 4 ? -1 : std::int32_t((r * 7) % V);
  const auto dlp = values(rows, 3, 1.0f), dh = values(rows, 4, 1.0f);

  // Reference: full logits, softmax by hand (double), gradients by the closed form.
  std::vector<double> ref_lp(rows), ref_ent(rows), ref_dh(rows * D, 0.0), ref_dw(V * D, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> z(V);
    double m = -1e30;
    for (std::int64_t j = 0; j < V; ++j) {
      for (std::int64_t k = 0; k < D; ++k) z[j] += double(h[r * D + k]) * W[j * D + k];
      m = std::max(m, z[j]);
    }
    double s = 0;
    for (double zj : z) s += std::exp(zj - m);
    const double lse = m + std::log(s);
    double ent = 0;
    for (double zj : z) ent -= std::exp(zj - lse) * (zj - lse);
    ref_lp[r] = t[r] >= 0 ? z[t[r]] - lse : 0.0;
    ref_ent[r] = ent;
    for (std::int64_t j = 0; j < V; ++j) {
      const double p = std::exp(z[j] - lse);
      double g = -dh[r] * p * (z[j] - lse + ent);
      if (t[r] >= 0) g += dlp[r] * ((j == t[r]) - p);
      for (std::int64_t k = 0; k < D; ++k) {
        ref_dh[r * D + k] += g * W[j * D + k];
        ref_dw[j * D + k] += g * h[r * D + k];
      }
    }
  }
  for (std::int64_t chunk : {1, 4, 13, 64}) {
    rl::ChunkedLmHead<float> head(*be, V, D, chunk);
    std::vector<float> lp(rows), ent(rows), gh(rows * D, 0.0f), gw(V * D, 0.0f);
    head.forward(h.data(), rows, W.data(), t.data(), lp.data(), ent.data());
    head.backward(h.data(), rows, W.data(), t.data(), dlp.data(), dh.data(), gh.data(), gw.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      BOOST_CHECK_SMALL(lp[r] - ref_lp[r], 1e-5);
      BOOST_CHECK_SMALL(ent[r] - ref_ent[r], 1e-5);
    }
    double e_dh = 0, e_dw = 0;
    for (std::size_t i = 0; i < gh.size(); ++i) e_dh = std::max(e_dh, std::abs(gh[i] - ref_dh[i]));
    for (std::size_t i = 0; i < gw.size(); ++i) e_dw = std::max(e_dw, std::abs(gw[i] - ref_dw[i]));
    BOOST_CHECK_MESSAGE(e_dh < 1e-4 && e_dw < 1e-4, "chunk " << chunk << ": d_hidden error " << e_dh << ", d_weight error " << e_dw);
  }
}

BOOST_AUTO_TEST_CASE(next_token_targets_stop_at_sequence_ends) {
  const std::vector<std::int32_t> tokens{4, 5, 6, 7, 8};
  const std::vector<std::int64_t> offsets{0, 3, 3, 5};  // an empty sequence in the middle
  const auto t = rl::next_token_targets({tokens, offsets});
  BOOST_CHECK((t == std::vector<std::int32_t>{5, 6, -1, 8, -1}));
}

