// The arithmetic of one row (or one pair) of each RL loss of backend/losses.hpp, shared
// by the CPU loops (backend/cpu/losses.cpp) and the CUDA kernels (backend/cuda/losses.cu)
// so that the two cannot drift apart: each function takes one row's inputs and returns
// its terms; the callers keep the loops, the weights and the sums.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/losses.hpp"

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

namespace braid::backend::rows {

// log(1 + e^x) without overflow for large x.
BRAID_HOST_DEVICE inline double softplus(double x) { return x > 0 ? x + ::log1p(::exp(-x)) : ::log1p(::exp(x)); }
BRAID_HOST_DEVICE inline double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + ::exp(-x)) : ::exp(x) / (1.0 + ::exp(x));
}
BRAID_HOST_DEVICE inline double clamp(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

struct PolicyRow {
  double loss = 0;       // ℓ of the row (unweighted)
  double pg = 0;         // its clipped policy-gradient term
  double grad = 0;       // ∂ℓ/∂logp
  double ratio = 0, log_ratio = 0;
  double kl_ref = 0;     // the KL estimate k (with kl_coef)
  bool clipped = false;
};

// The estimate k of KL(π‖π_ref) from d = logp − ref, and ∂k/∂logp (backend/losses.hpp).
struct KlTerm {
  double value = 0, grad = 0;
};
BRAID_HOST_DEVICE inline KlTerm kl_term(double d, KlEstimator estimator) {
  switch (estimator) {
    case KlEstimator::k1: return {d, 1.0};
    case KlEstimator::k2: return {0.5 * d * d, d};
    case KlEstimator::k3: break;
  }
  const double e = ::exp(-d);
  return {e + d - 1.0, 1.0 - e};
}

// Row i's log ρ: the given log_ratio, else logprob − old_logprob.
template <typename T>
BRAID_HOST_DEVICE inline double row_log_ratio(const PolicyLossRows<T>& in, std::int64_t i) {
  return in.log_ratio ? double(in.log_ratio[i]) : double(in.logprob[i]) - double(in.old_logprob[i]);
}

// `entropy`: the row's entropy (0 without one); `ref_logp` is read with kl_coef only.
BRAID_HOST_DEVICE inline PolicyRow policy_row(double logp, double log_ratio, double advantage, double entropy,
                                              double ref_logp, const PolicyLossOptions& opt) {
  PolicyRow r;
  r.log_ratio = log_ratio;
  r.ratio = ::exp(r.log_ratio);
  const double unclipped = -advantage * r.ratio;
  const double clipped_term = -advantage * clamp(r.ratio, 1.0 - opt.clip_low, 1.0 + opt.clip_high);
  // Only the strictly larger clipped branch has ρ outside the range, where its gradient is 0.
  r.clipped = clipped_term > unclipped;
  r.pg = r.clipped ? clipped_term : unclipped;
  r.grad = r.clipped ? 0.0 : -advantage * r.ratio;
  r.loss = r.pg - opt.entropy_coef * entropy;
  if (opt.kl_coef != 0) {
    const KlTerm k = kl_term(logp - ref_logp, opt.kl_estimator);
    r.kl_ref = k.value;
    r.loss += opt.kl_coef * k.value;
    r.grad += opt.kl_coef * k.grad;
  }
  return r;
}

struct ValueRow {
  double term = 0;   // the squared error that counts (ℓ = ½ term)
  double grad = 0;   // ∂ℓ/∂V
  double error = 0;  // V − R
  bool clipped = false;
};

BRAID_HOST_DEVICE inline ValueRow value_row(double v, double ret, double old_v, double clip) {
  ValueRow r;
  r.error = v - ret;
  r.term = r.error * r.error;
  r.grad = r.error;
  if (clip > 0) {
    const double cerr = old_v + clamp(v - old_v, -clip, clip) - ret;
    // Strictly larger only when V lies outside V_old ± clip, where the clipped value does not move with V.
    if (cerr * cerr > r.term) {
      r.term = cerr * cerr;
      r.grad = 0;
      r.clipped = true;
    }
  }
  return r;
}

// Bradley–Terry: ℓ = softplus(−m) for the margin m = r_chosen − r_rejected; ∂ℓ/∂m = −σ(−m).
struct PairRow {
  double loss = 0, d_margin = 0;
};
BRAID_HOST_DEVICE inline PairRow pair_row(double margin) { return {softplus(-margin), -sigmoid(-margin)}; }

// DPO: π and π_ref of a pair's chosen (0) and rejected (1) sequence, summed over their rows.
template <typename T>
BRAID_HOST_DEVICE inline void dpo_sequence_sums(const DpoLossRows<T>& in, std::int64_t pair, double logp[2],
                                                double ref[2]) {
  for (int side = 0; side < 2; ++side) {
    const std::int64_t s = 2 * pair + side;
    logp[side] = 0;
    ref[side] = 0;
    for (std::int64_t row = in.sequence_rows[s]; row < in.sequence_rows[s + 1]; ++row) {
      const double w = in.weight[row];
      logp[side] += w * double(in.logprob[row]);
      ref[side] += w * double(in.ref_logprob[row]);
    }
  }
}

// The loss of z = (π_c − π_ref,c) − (π_r − π_ref,r) and ∂ℓ/∂z.
struct DpoRow {
  double loss = 0, d_z = 0;
};
BRAID_HOST_DEVICE inline DpoRow dpo_row(double z, const DpoLossOptions& opt) {
  const double beta = opt.beta;
  if (opt.loss == DpoLoss::sigmoid) return {softplus(-beta * z), -beta * sigmoid(-beta * z)};  // −log σ(βz)
  const double e = z - 1.0 / (2.0 * beta);
  return {e * e, 2.0 * e};
}

}  // namespace braid::backend::rows
