// The policy-optimisation algorithms braid names (the run file's "algorithm", braid-score's
// --algorithm, braid-train's modes), each a preset of the same switches: how braid-score
// turns rewards into advantages, and how braid-train's policy loss aggregates, clips and
// regularises. docs/tools/train.md has each one's equations and sources.
//
//   name                   advantages (braid-score)            loss (braid-train)
//   ppo                    GAE with a critic; β 0.05 k1 in     token-mean, clip 0.2
//                          the reward
//   grpo                   (R − mean_G) / (std_G + ε)          seq-mean-token-mean, clip 0.2, β 0.04 k3 in the loss
//   dr-grpo                R − mean_G                          seq-mean-token-sum, clip 0.2
//   dapo                   (R − mean_G) / (std_G + ε), reward  token-mean, clip 0.2 / 0.28; groups of equal
//                          shaped over the last 20% of the     rewards dropped (dynamic sampling)
//                          length budget
//   gspo                   (R − mean_G) / (std_G + ε)          seq-mean-token-mean, sequence ratio, clip 3e-4 / 4e-4
//   rloo                   R − mean of the other samples       token-mean, clip 0.2
//   reinforce++            Σ_{s≥t} γ^{s−t} r_s, whitened       token-mean, clip 0.2; β 0.01 k1 in the reward
//   reinforce++-baseline   R − mean_G, whitened                token-mean, clip 0.2; β 0.01 k3 in the loss
//
// Every switch can be set apart from the preset (braid-score's and braid-train's options).
#pragma once

#include "backend/losses.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rl {

enum class Estimator {
  gae,               // PPO: GAE over the critic's values (rl/gae.hpp)
  group,             // R − mean of the sample's group, divided by the group's std when normalising
  leave_one_out,     // RLOO: R − mean of the group's other samples
  returns_to_go,     // REINFORCE++: per token, the discounted sum of the rewards from there on
};

// Whether the estimator's advantages need every sample of a group (sample_id / samples_per_prompt).
constexpr bool grouped(Estimator e) { return e == Estimator::group || e == Estimator::leave_one_out; }

struct Algorithm {
  std::string name;
  Estimator estimator = Estimator::gae;
  bool critic = false;                  // trains a value model (PPO)
  bool std_normalize = false;           // group: divide by the group's std
  bool whiten = false;                  // braid-train whitens the advantages over the batch
  std::string loss_agg = "token-mean";  // train::Aggregation's names
  double clip_low = 0.2, clip_high = 0.2;
  bool sequence_ratio = false;          // GSPO
  double kl_loss_coef = 0;              // β of the KL term in braid-train's loss
  backend::KlEstimator kl_loss_estimator = backend::KlEstimator::k3;
  std::optional<double> kl_reward_coef; // β of the KL penalty in braid-score's rewards (unset: braid-score's own)
  bool filter_groups = false;           // DAPO: drop groups whose rewards are all equal
  double overlong_fraction = 0;         // DAPO: the overlong reward shaping's buffer, of max_new_tokens
};

// The algorithm of that name; nullopt for another.
std::optional<Algorithm> algorithm_named(std::string_view name);
// Every name, in the table's order ("ppo", "grpo", ...).
const std::vector<std::string>& algorithm_names();
// "ppo, grpo, ..." for messages.
std::string algorithm_list();

// "k1" | "k2" | "k3".
std::optional<backend::KlEstimator> kl_estimator_named(std::string_view name);
const char* to_string(backend::KlEstimator k);

}  // namespace braid::rl
