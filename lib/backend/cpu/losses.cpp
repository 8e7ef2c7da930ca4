// The RL losses on the CPU (backend/losses.hpp), one pass over the rows each (DPO: two).
#include "backend/cpu/kernels.hpp"
#include "backend/loss_rows.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::backend::cpu {

template <typename T>
PolicyLossSums policy_loss(std::int64_t n, const PolicyLossRows<T>& in, const PolicyLossOptions& opt, double scale,
                           T* d_logprob, T* d_entropy) {
  const bool with_entropy = in.entropy != nullptr;
  const bool entropy_grad = opt.entropy_coef != 0;
  const bool with_ref = opt.kl_coef != 0;
  if (entropy_grad && (!with_entropy || !d_entropy)) {
    throw std::invalid_argument("policy_loss: entropy_coef needs the entropy and its gradient");
  }
  if (with_ref && !in.ref_logprob) throw std::invalid_argument("policy_loss: kl_coef needs ref_logprob");
  PolicyLossSums r;
  for (std::int64_t i = 0; i < n; ++i) {
    const double w = in.weight[i];
    d_logprob[i] = 0;
    if (entropy_grad) d_entropy[i] = 0;
    if (w == 0) continue;
    const rows::PolicyRow row = rows::policy_row(in.logprob[i], rows::row_log_ratio(in, i), in.advantages[i],
                                                 with_entropy ? double(in.entropy[i]) : 0.0,
                                                 with_ref ? double(in.ref_logprob[i]) : 0.0, opt);
    if (with_entropy) {
      r.entropy += w * in.entropy[i];
      if (entropy_grad) d_entropy[i] = static_cast<T>(-scale * w * opt.entropy_coef);
    }
    if (with_ref) r.kl_ref += w * row.kl_ref;
    d_logprob[i] = static_cast<T>(scale * w * row.grad);
    r.loss += w * row.loss;
    r.policy_loss += w * row.pg;
    r.weight += w;
    r.clipped += w * (row.clipped ? 1.0 : 0.0);
    r.approx_kl += w * ((row.ratio - 1.0) - row.log_ratio);
    r.ratio_max = std::max(r.ratio_max, row.ratio);
  }
  return r;
}

template <typename T>
ValueLossSums value_loss(std::int64_t n, const ValueLossRows<T>& in, double clip, double scale, T* d_values) {
  ValueLossSums r;
  for (std::int64_t i = 0; i < n; ++i) {
    const double w = in.weight[i];
    d_values[i] = 0;
    if (w == 0) continue;
    const rows::ValueRow row = rows::value_row(in.values[i], in.returns[i], clip > 0 ? double(in.old_values[i]) : 0.0, clip);
    r.loss += w * 0.5 * row.term;
    r.weight += w;
    r.clipped += w * (row.clipped ? 1.0 : 0.0);
    r.error += w * row.error;
    d_values[i] = static_cast<T>(scale * w * row.grad);
  }
  return r;
}

template <typename T>
PairwiseLossSums pairwise_loss(std::int64_t pairs, const T* values, const std::int64_t* chosen_rows,
                               const std::int64_t* rejected_rows, double scale, T* d_values) {
  PairwiseLossSums r;
  for (std::int64_t i = 0; i < pairs; ++i) {
    const double margin = double(values[chosen_rows[i]]) - double(values[rejected_rows[i]]);
    const rows::PairRow row = rows::pair_row(margin);
    r.loss += row.loss;
    r.correct += margin > 0 ? 1.0 : 0.0;
    r.margin += margin;
    const double g = row.d_margin * scale;
    d_values[chosen_rows[i]] = static_cast<T>(g);
    d_values[rejected_rows[i]] = static_cast<T>(-g);
  }
  return r;
}

template <typename T>
double nll_loss(std::int64_t n, const T* logprob, const T* weight, double scale, T* d_logprob) {
  double loss = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    loss -= double(weight[i]) * double(logprob[i]);
    d_logprob[i] = static_cast<T>(-scale * double(weight[i]));
  }
  return loss;
}

template <typename T>
DpoLossSums dpo_loss(std::int64_t pairs, const DpoLossRows<T>& in, const DpoLossOptions& opt, double scale,
                     T* d_logprob) {
  if (!(opt.beta > 0)) throw std::invalid_argument("dpo_loss: beta must be > 0");
  const double beta = opt.beta;
  DpoLossSums r;
  for (std::int64_t p = 0; p < pairs; ++p) {
    double logp[2], ref[2];
    rows::dpo_sequence_sums(in, p, logp, ref);
    const double z = (logp[0] - ref[0]) - (logp[1] - ref[1]);
    const rows::DpoRow term = rows::dpo_row(z, opt);
    const double d_z = term.d_z;
    r.loss += term.loss;
    r.correct += beta * z > 0 ? 1.0 : 0.0;
    r.margin += beta * z;
    r.reward_chosen += beta * (logp[0] - ref[0]);
    r.reward_rejected += beta * (logp[1] - ref[1]);
    r.logp_chosen += logp[0];
    r.logp_rejected += logp[1];
    r.logp_correct += logp[0] > logp[1] ? 1.0 : 0.0;
    // ∂z/∂π_c = 1, ∂z/∂π_r = −1, ∂π/∂logp_row = weight_row.
    for (int side = 0; side < 2; ++side) {
      const std::int64_t s = 2 * p + side;
      const double g = scale * d_z * (side == 0 ? 1.0 : -1.0);
      for (std::int64_t row = in.sequence_rows[s]; row < in.sequence_rows[s + 1]; ++row) {
        d_logprob[row] = static_cast<T>(g * double(in.weight[row]));
      }
    }
  }
  return r;
}

template <typename T>
WhiteningStats whiten(std::int64_t n, T* x, const std::uint8_t* mask, double eps) {
  WhiteningStats w;
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!mask[i]) continue;
    sum += double(x[i]);
    ++w.count;
  }
  if (w.count == 0) return w;
  w.mean = sum / double(w.count);
  double sq = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (mask[i]) sq += (double(x[i]) - w.mean) * (double(x[i]) - w.mean);
  }
  w.std = std::sqrt(sq / double(w.count));
  for (std::int64_t i = 0; i < n; ++i) {
    if (mask[i]) x[i] = static_cast<T>((double(x[i]) - w.mean) / (w.std + eps));
  }
  return w;
}

#define BRAID_INSTANTIATE(T)                                                                                       \
  template PolicyLossSums policy_loss<T>(std::int64_t, const PolicyLossRows<T>&, const PolicyLossOptions&, double, \
                                         T*, T*);                                                                   \
  template ValueLossSums value_loss<T>(std::int64_t, const ValueLossRows<T>&, double, double, T*);                \
  template PairwiseLossSums pairwise_loss<T>(std::int64_t, const T*, const std::int64_t*, const std::int64_t*,     \
                                             double, T*);                                                           \
  template double nll_loss<T>(std::int64_t, const T*, const T*, double, T*);                                        \
  template DpoLossSums dpo_loss<T>(std::int64_t, const DpoLossRows<T>&, const DpoLossOptions&, double, T*);        \
  template WhiteningStats whiten<T>(std::int64_t, T*, const std::uint8_t*, double);
BRAID_INSTANTIATE(float)
BRAID_INSTANTIATE(double)
#undef BRAID_INSTANTIATE

}  // namespace braid::backend::cpu
