#include "rl/ppo_loss.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::rl {

namespace {

void require_length(std::size_t n, std::size_t got, const char* what) {
  if (got != n) throw std::invalid_argument(std::string("loss input ") + what + " differs in length from the rows");
}

}  // namespace

PolicyLossResult policy_loss(const PolicyLossInput& in, const PolicyLossOptions& opt, std::span<float> d_logprob,
                             std::span<float> d_entropy, double scale) {
  const std::size_t n = in.logprob.size();
  require_length(n, in.old_logprob.size(), "old_logprob");
  require_length(n, in.advantages.size(), "advantages");
  require_length(n, in.weight.size(), "weight");
  require_length(n, d_logprob.size(), "d_logprob");
  const bool with_entropy = !in.entropy.empty();
  if (with_entropy) require_length(n, in.entropy.size(), "entropy");
  if (opt.entropy_coef != 0) {
    if (!with_entropy) throw std::invalid_argument("policy_loss: entropy_coef needs the entropy");
    require_length(n, d_entropy.size(), "d_entropy");
  }
  const bool with_ref = opt.kl_coef != 0;
  if (with_ref) require_length(n, in.ref_logprob.size(), "ref_logprob");

  PolicyLossResult r;
  double clipped = 0, kl_old = 0, entropy = 0, kl_ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = in.weight[i];
    d_logprob[i] = 0;
    if (!d_entropy.empty()) d_entropy[i] = 0;
    if (w == 0) continue;
    const double logp = in.logprob[i];
    const double log_ratio = logp - double(in.old_logprob[i]);
    const double ratio = std::exp(log_ratio);
    const double a = in.advantages[i];
    const double unclipped = -a * ratio;
    const double clipped_term = -a * std::clamp(ratio, 1.0 - opt.clip_low, 1.0 + opt.clip_high);
    // Only the strictly larger clipped branch has ρ outside the range, where its gradient is 0.
    const bool is_clipped = clipped_term > unclipped;
    const double pg = is_clipped ? clipped_term : unclipped;
    double grad = is_clipped ? 0.0 : -a * ratio;
    double loss = pg;
    if (with_entropy) {
      loss -= opt.entropy_coef * in.entropy[i];
      entropy += w * in.entropy[i];
      if (opt.entropy_coef != 0) d_entropy[i] = static_cast<float>(-scale * w * opt.entropy_coef);
    }
    if (with_ref) {
      const double diff = double(in.ref_logprob[i]) - logp;
      const double e = std::exp(diff);
      const double k3 = e - diff - 1.0;
      loss += opt.kl_coef * k3;
      grad += opt.kl_coef * (1.0 - e);
      kl_ref += w * k3;
    }
    d_logprob[i] = static_cast<float>(scale * w * grad);
    r.loss += w * loss;
    r.policy_loss += w * pg;
    r.weight += w;
    clipped += w * (is_clipped ? 1.0 : 0.0);
    kl_old += w * ((ratio - 1.0) - log_ratio);
    r.ratio_max = std::max(r.ratio_max, ratio);
  }
  if (r.weight > 0) {
    r.clip_fraction = clipped / r.weight;
    r.approx_kl = kl_old / r.weight;
    r.entropy = entropy / r.weight;
    r.kl_ref = kl_ref / r.weight;
  }
  return r;
}

ValueLossResult value_loss(const ValueLossInput& in, double clip, std::span<float> d_values, double scale) {
  const std::size_t n = in.values.size();
  require_length(n, in.old_values.size(), "old_values");
  require_length(n, in.returns.size(), "returns");
  require_length(n, in.weight.size(), "weight");
  require_length(n, d_values.size(), "d_values");
  ValueLossResult r;
  double clipped = 0, error = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = in.weight[i];
    d_values[i] = 0;
    if (w == 0) continue;
    const double v = in.values[i];
    const double ret = in.returns[i];
    const double err = v - ret;
    double term = err * err;
    double grad = err;
    bool is_clipped = false;
    if (clip > 0) {
      const double v_old = in.old_values[i];
      const double vc = v_old + std::clamp(v - v_old, -clip, clip);
      const double cerr = vc - ret;
      // Strictly larger only when V lies outside V_old ± clip, where vc does not move with V.
      if (cerr * cerr > term) {
        term = cerr * cerr;
        grad = 0;
        is_clipped = true;
      }
    }
    r.loss += w * 0.5 * term;
    r.weight += w;
    clipped += w * (is_clipped ? 1.0 : 0.0);
    error += w * err;
    d_values[i] = static_cast<float>(scale * w * grad);
  }
  if (r.weight > 0) {
    r.clip_fraction = clipped / r.weight;
    r.mean_error = error / r.weight;
  }
  return r;
}

}  // namespace braid::rl
