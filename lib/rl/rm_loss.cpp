#include "rl/rm_loss.hpp"

#include <cmath>
#include <stdexcept>

namespace braid::rl {

namespace {

// log(1 + e^x) without overflow for large x.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

}  // namespace

PairwiseLossResult pairwise_loss(std::span<const float> chosen, std::span<const float> rejected,
                                 std::span<float> d_chosen, std::span<float> d_rejected, double scale) {
  const std::size_t n = chosen.size();
  if (rejected.size() != n || d_chosen.size() != n || d_rejected.size() != n) {
    throw std::invalid_argument("pairwise_loss: chosen, rejected and their gradients differ in length");
  }
  PairwiseLossResult r;
  if (n == 0) return r;
  const double inv = 1.0 / double(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double margin = double(chosen[i]) - double(rejected[i]);
    r.loss += softplus(-margin) * inv;
    r.accuracy += (margin > 0 ? 1.0 : 0.0) * inv;
    r.margin += margin * inv;
    // d softplus(−m)/dm = −σ(−m)
    const double g = -sigmoid(-margin) * inv * scale;
    d_chosen[i] = static_cast<float>(g);
    d_rejected[i] = static_cast<float>(-g);
  }
  return r;
}

}  // namespace braid::rl
