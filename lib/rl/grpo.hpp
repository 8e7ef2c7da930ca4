// Group-relative advantages: the samples of one prompt form a group G, and each sample's
// advantage is its reward against the group's, broadcast to every response token of the
// sample (returns = advantages; no critic):
//
//   group, std_normalize (GRPO, DeepSeekMath):  A_i = (R_i - mean_G) / (std_G + eps),
//                                               std_G = sqrt(Σ (R_j - mean_G)² / |G|)
//   group (Dr. GRPO, REINFORCE++-baseline):     A_i = R_i - mean_G
//   leave_one_out (RLOO, Ahmadian et al. 2024): A_i = R_i - Σ_{j≠i} R_j / (|G| - 1)
//                                               (= |G| / (|G| - 1) · (R_i - mean_G); R_i when |G| = 1)
//
// A group is sample_id / samples_per_prompt; groups may arrive over several shards,
// so the rewards are collected in a GroupRewards table until each group is whole.
#pragma once

#include "rl/algorithms.hpp"
#include "rl/sequence_layout.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace braid::rl {

struct GroupOptions {
  Estimator estimator = Estimator::group;  // group or leave_one_out
  bool std_normalize = true;               // group: divide by std_G + eps
  double eps = 1e-6;
};

// The advantages of one whole group's rewards. std::invalid_argument for an estimator
// that is not a group's.
std::vector<double> group_advantages(std::span<const float> rewards, const GroupOptions& opt);
// Whether a group's rewards are all equal (every advantage 0: DAPO's dynamic sampling drops it).
bool rewards_all_equal(std::span<const float> rewards);

class GroupRewards {
 public:
  // std::invalid_argument unless samples_per_prompt >= 1.
  explicit GroupRewards(std::int64_t samples_per_prompt);

  std::int64_t samples_per_prompt() const { return per_group_; }
  std::int64_t group_of(std::int64_t sample_id) const { return sample_id / per_group_; }

  // Records a sample's reward; false (nothing recorded) when the sample is already there.
  bool add(std::int64_t sample_id, float reward);
  bool contains(std::int64_t sample_id) const;
  // Whether every sample of the group has its reward.
  bool complete(std::int64_t group) const;
  // Samples of the group recorded so far.
  std::int64_t count(std::int64_t group) const;
  // The sample's advantage; std::logic_error when its group is not complete.
  double advantage(std::int64_t sample_id, const GroupOptions& opt) const;
  // Groups that have some samples but not all, in increasing order.
  std::vector<std::int64_t> incomplete_groups() const;

 private:
  std::int64_t per_group_;
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, float>>> groups_;  // group -> (sample, reward)
};

// Fills advantages (token_count() entries; prompt positions 0; GRPO's returns are the
// same array) with each sequence's group advantage, sequence i being sample
// sample_ids[i]. The table must hold every group of the batch complete
// (std::logic_error naming the group otherwise); std::invalid_argument when the
// lengths do not fit the layout.
void broadcast_group_advantages(const SequenceLayout& layout, std::span<const std::int64_t> sample_ids,
                                const GroupRewards& groups, const GroupOptions& opt, std::span<float> advantages);

}  // namespace braid::rl
