// The objectives braid trains with (train/objective.hpp): PPO's actor and critic,
// GRPO's actor, the reward model's pairwise loss, SFT, and DPO.
//
// What each reads from a micro-batch (io::SampleBatch), by the shard layout's
// alignment: a per-token entry t belongs to token t and pairs with row t − 1 of the
// forward (the position that produced token t). Only response tokens count.
//
//   PolicyObjective  (PPO, GRPO)  logprobs_actor, advantages [, logprobs_ref for kl_coef]
//   ValueObjective   (PPO critic) values (the scoring critic's, for clipping), returns
//   PairwiseRewardObjective       sequences in pairs: 2i chosen, 2i+1 rejected; the reward
//                                 is the value head at each one's last token
//   SftObjective                  tokens and prompt_len (the response tokens are learnt)
//   DpoObjective                  sequences in pairs as the reward model's, logprobs_ref
//                                 (the reference policy's, computed once before training)
#pragma once

#include "backend/backend.hpp"
#include "rl/chunked_lm_head.hpp"
#include "train/objective.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace braid::train {

// How the per-token losses become one number over the whole mini-batch (objective.hpp),
// verl's loss_agg_mode: with ℓ_{i,t} the loss of response token t of sequence i, T_i its
// response tokens and G the mini-batch's sequences with a response,
//
//   token_mean           Σ_i Σ_t ℓ_{i,t} / Σ_i T_i           a unit is a response token (PPO, DAPO)
//   seq_mean_token_sum   Σ_i Σ_t ℓ_{i,t} / G                 a unit is a sequence (Dr. GRPO)
//   seq_mean_token_mean  Σ_i (Σ_t ℓ_{i,t} / T_i) / G         a unit is a sequence (GRPO,
//                                                            DeepSeekMath eq. 3; GSPO)
enum class Aggregation { token_mean, seq_mean_token_sum, seq_mean_token_mean };
// "token-mean", "seq-mean-token-sum", "seq-mean-token-mean"; nullopt for another name.
std::optional<Aggregation> aggregation_named(std::string_view name);
const char* to_string(Aggregation a);

// Row weights for the learnt response tokens of mb (io::SampleBatch::learnt: all of a
// response unless its loss_mask says otherwise): row t − 1 for token t, 0 elsewhere; 1 per
// token (token_mean, seq_mean_token_sum) or 1/T_i for a sequence of T_i learnt tokens
// (seq_mean_token_mean).
std::vector<float> response_row_weights(const io::SampleBatch& mb, Aggregation aggregation);
// The units of mb (learnt response tokens, or sequences with one), from the offsets and loss_mask.
double response_units(const io::SampleBatch& mb, Aggregation aggregation);
// A per-token array laid onto rows: row t − 1 gets per_token[t] (the last row of a sequence 0).
std::vector<float> token_array_on_rows(const io::SampleBatch& mb, const std::vector<float>& per_token);
// GSPO's sequence ratio (Zheng et al. 2025): on every response row of sequence i,
// log s_i = Σ_t (logp_t − old_t) / T_i over its response rows, capped at 10 (as verl's);
// other rows 0. Rows as token_array_on_rows lays them out.
std::vector<float> sequence_log_ratios(const io::SampleBatch& mb, std::span<const float> logprob_rows,
                                       std::span<const float> old_rows);

// Host vectors mirrored in backend memory, grown on demand (a no-op copy on the CPU backend).
template <typename T>
class DeviceRows {
 public:
  T* upload(backend::Backend& be, const std::vector<T>& host);
  T* room(backend::Backend& be, std::size_t n);

 private:
  backend::Buffer<T> buf_;
};

struct PolicyObjectiveOptions {
  backend::PolicyLossOptions loss;
  Aggregation aggregation = Aggregation::token_mean;
  // GSPO: each token's ratio is its sequence's (sequence_log_ratios), clipped as a whole.
  bool sequence_ratio = false;
  std::int64_t head_chunk_rows = 0;  // 0: rl::default_chunk_rows
};
// PPO: defaults. GRPO: loss.kl_coef > 0 (reads logprobs_ref), seq_mean_token_mean.
PolicyObjectiveOptions ppo_actor_options(double clip = 0.2, double entropy_coef = 0.0);
PolicyObjectiveOptions grpo_actor_options(double clip = 0.2, double kl_coef = 0.04, double entropy_coef = 0.0);

class PolicyObjective final : public Objective {
 public:
  explicit PolicyObjective(PolicyObjectiveOptions opt);
  bool needs_lm_head() const override { return true; }
  bool needs_value_head() const override { return false; }
  double units(const io::SampleBatch& mb) const override { return response_units(mb, opt_.aggregation); }
  LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                          double scale) override;

 private:
  PolicyObjectiveOptions opt_;
  std::unique_ptr<rl::ChunkedLmHead<float>> head_;
  DeviceRows<std::int32_t> targets_;
  DeviceRows<float> old_, adv_, ref_, weight_, logprob_, entropy_, d_logprob_, d_entropy_, log_ratio_;
};

class ValueObjective final : public Objective {
 public:
  explicit ValueObjective(double clip = 0.2) : clip_(clip) {}
  bool needs_lm_head() const override { return false; }
  bool needs_value_head() const override { return true; }
  double units(const io::SampleBatch& mb) const override { return response_units(mb, Aggregation::token_mean); }
  LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                          double scale) override;

 private:
  double clip_;
  DeviceRows<float> old_, returns_, weight_, values_, d_values_;
};

class PairwiseRewardObjective final : public Objective {
 public:
  bool needs_lm_head() const override { return false; }
  bool needs_value_head() const override { return true; }
  double units(const io::SampleBatch& mb) const override;  // pairs
  LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                          double scale) override;

 private:
  DeviceRows<float> values_, d_values_;
  DeviceRows<std::int64_t> chosen_, rejected_;
};

// The scalar a reward model gives each sequence of mb (its value head at the last
// token), after m.forward(mb): what braid-score's reward pass and the RM test read.
std::vector<float> last_token_values(const model::Model& m, const model::Activations& acts, const io::SampleBatch& mb);

class SftObjective final : public Objective {
 public:
  explicit SftObjective(std::int64_t head_chunk_rows = 0) : chunk_rows_(head_chunk_rows) {}
  bool needs_lm_head() const override { return true; }
  bool needs_value_head() const override { return false; }
  double units(const io::SampleBatch& mb) const override { return response_units(mb, Aggregation::token_mean); }
  LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                          double scale) override;

 private:
  std::int64_t chunk_rows_;
  std::unique_ptr<rl::ChunkedLmHead<float>> head_;
  DeviceRows<std::int32_t> targets_;
  DeviceRows<float> weight_, logprob_, d_logprob_;
};

struct DpoObjectiveOptions {
  backend::DpoLossOptions loss;     // sigmoid (DPO) or ipo, β
  bool length_normalize = false;    // π = mean of a completion's token logprobs, not their sum
  std::int64_t head_chunk_rows = 0;  // 0: rl::default_chunk_rows
};

// DPO on a policy: pairs of sequences (2i chosen, 2i + 1 rejected, as read by
// read_preference_jsonl) with the reference's per-token logprobs in logprobs_ref; the
// loss is a mean over pairs. Metrics (means over pairs): accuracy (implicit reward of
// the chosen above the rejected's), margin, reward_chosen, reward_rejected (β·(π − π_ref)),
// logp_chosen, logp_rejected (π) and logp_accuracy (π_c > π_r).
class DpoObjective final : public Objective {
 public:
  explicit DpoObjective(DpoObjectiveOptions opt) : opt_(opt) {}
  bool needs_lm_head() const override { return true; }
  bool needs_value_head() const override { return false; }
  double units(const io::SampleBatch& mb) const override;  // pairs
  LossStats loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                          double scale) override;

 private:
  DpoObjectiveOptions opt_;
  std::unique_ptr<rl::ChunkedLmHead<float>> head_;
  DeviceRows<std::int32_t> targets_;
  DeviceRows<std::int64_t> sequence_rows_;
  DeviceRows<float> ref_, weight_, logprob_, d_logprob_;
};

}  // namespace braid::train
