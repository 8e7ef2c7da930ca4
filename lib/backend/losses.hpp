// The RL losses as backend ops (Ops<T>::policy_loss, value_loss, pairwise_loss,
// nll_loss, dpo_loss): what they read, and the sums they return to the host.
//
// Rows are those of a packed forward: row r produces the token after it. An objective
// (train/objectives.hpp) lays the per-token arrays of a sample batch onto rows and gives
// each row a weight: 0 for rows that do not count (prompt positions, the last row of a
// sequence), 1 per response token, or 1/len for GRPO's mean of per-sequence means. A loss
// is Σ_r weight_r · ℓ_r; each op writes d[r] = scale · ∂loss/∂x_r and returns weighted
// sums (not means), so that micro-batches add up into their mini-batch.
//
// Policy (Schulman et al. 2017; per-token ratio ρ = exp(logp − logp_old), or with a
// per-row log_ratio given, ρ = exp(log_ratio) — GSPO's sequence ratio, whose gradient
// with respect to the row's logp is taken as ρ, Zheng et al. 2025's GSPO-token form):
//   ℓ = max(−A·ρ, −A·clip(ρ, 1−ε_low, 1+ε_high)) − c_H · H + β · k
// k estimates KL(π‖π_ref) from d = logp − ref (Schulman's "Approximating KL divergence"):
//   k1 = d                                       ∂k1/∂logp = 1
//   k2 = ½·d²                                    ∂k2/∂logp = d
//   k3 = exp(−d) + d − 1                         ∂k3/∂logp = 1 − exp(−d)   (DeepSeekMath's)
// Value (clipped around the values the samples were scored with):
//   ℓ = ½ · max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²)      (clip <= 0: ½ (V − R)²)
// Pairwise (Bradley–Terry, InstructGPT): ℓ = −log σ(r_chosen − r_rejected) per pair.
// NLL (SFT): ℓ = −logp.
// DPO (Rafailov et al. 2023), per pair of a chosen (c) and a rejected (r) sequence, with
// π = Σ_rows weight · logp over a sequence's rows (weight 1 per response token, or 1/len:
// length-normalised), π_ref the same sum of the reference's logprobs, and
// z = (π_c − π_ref,c) − (π_r − π_ref,r):
//   sigmoid: ℓ = −log σ(β·z)                      (the DPO loss)
//   ipo:     ℓ = (z − 1/(2β))²                    (IPO, Azar et al. 2023, τ = β)
// β·(π − π_ref) is each completion's implicit reward; a pair counts as right when the
// chosen one's is the larger (β·z > 0).
// Whitening (PPO's advantage normalisation): x ← (x − mean) / (std + eps) on the masked
// rows, mean and std over them; the other rows stay as they are.
#pragma once

#include <cstdint>

namespace braid::backend {

enum class KlEstimator { k1, k2, k3 };

struct PolicyLossOptions {
  double clip_low = 0.2;      // ε below 1
  double clip_high = 0.2;     // ε above 1
  double entropy_coef = 0.0;  // c_H: > 0 rewards entropy (needs the entropy)
  double kl_coef = 0.0;       // β: KL to the reference policy (needs ref_logprob)
  KlEstimator kl_estimator = KlEstimator::k3;
};

template <typename T>
struct PolicyLossRows {
  const T* logprob = nullptr;      // current policy
  const T* old_logprob = nullptr;  // the policy that sampled
  const T* advantages = nullptr;
  const T* weight = nullptr;
  const T* entropy = nullptr;      // optional: the current policy's entropy
  const T* ref_logprob = nullptr;  // required when kl_coef != 0
  const T* log_ratio = nullptr;    // optional: log ρ per row, instead of logprob − old_logprob
};

// Σ over rows of weight × ...; ratio_max is the largest ρ over counted rows.
struct PolicyLossSums {
  double loss = 0;         // Σ w·ℓ
  double policy_loss = 0;  // Σ w·(the clipped-surrogate part)
  double weight = 0;       // Σ w
  double clipped = 0;      // Σ w over rows where the clipped branch was taken (no gradient)
  double approx_kl = 0;    // Σ w·k3 of old vs current: (ρ − 1) − log ρ
  double entropy = 0;      // Σ w·H (0 without the entropy)
  double kl_ref = 0;       // Σ w·k (the chosen estimator) of current vs ref (0 without kl_coef)
  double ratio_max = 0;
};

template <typename T>
struct ValueLossRows {
  const T* values = nullptr;      // current critic
  const T* old_values = nullptr;  // the values the samples were scored with
  const T* returns = nullptr;
  const T* weight = nullptr;
};

struct ValueLossSums {
  double loss = 0;     // Σ w·ℓ
  double weight = 0;   // Σ w
  double clipped = 0;  // Σ w over rows where the clipped term was the larger (no gradient)
  double error = 0;    // Σ w·(V − R)
};

// whiten(): what it removed from the rows it whitened.
struct WhiteningStats {
  double mean = 0;
  double std = 0;          // population std over those rows
  std::int64_t count = 0;  // rows with mask != 0
};

struct PairwiseLossSums {
  double loss = 0;     // Σ over pairs
  double correct = 0;  // pairs with r_chosen > r_rejected
  double margin = 0;   // Σ r_chosen − r_rejected
};

enum class DpoLoss { sigmoid, ipo };

struct DpoLossOptions {
  DpoLoss loss = DpoLoss::sigmoid;
  double beta = 0.1;  // > 0
};

template <typename T>
struct DpoLossRows {
  const T* logprob = nullptr;        // current policy, per row
  const T* ref_logprob = nullptr;    // reference policy, per row
  const T* weight = nullptr;         // per row: 0 where a row does not count
  // 2·pairs + 1 row offsets: sequence s holds rows [sequence_rows[s], sequence_rows[s + 1]);
  // pair i is sequence 2i (chosen) and 2i + 1 (rejected).
  const std::int64_t* sequence_rows = nullptr;
};

// Σ over pairs.
struct DpoLossSums {
  double loss = 0;
  double correct = 0;          // pairs with β·z > 0
  double margin = 0;           // Σ β·z: implicit reward of chosen − rejected
  double reward_chosen = 0;    // Σ β·(π_c − π_ref,c)
  double reward_rejected = 0;  // Σ β·(π_r − π_ref,r)
  double logp_chosen = 0;      // Σ π_c
  double logp_rejected = 0;    // Σ π_r
  double logp_correct = 0;     // pairs with π_c > π_r (the policy alone prefers the chosen one)
};

}  // namespace braid::backend
