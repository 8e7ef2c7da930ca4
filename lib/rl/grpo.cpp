#include "rl/grpo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::rl {

std::vector<double> group_advantages(std::span<const float> rewards, const GroupOptions& opt) {
  if (opt.estimator != Estimator::group && opt.estimator != Estimator::leave_one_out) {
    throw std::invalid_argument("group_advantages: the estimator is not a group's (group, leave_one_out)");
  }
  std::vector<double> out(rewards.size(), 0.0);
  if (rewards.empty()) return out;
  const double n = double(rewards.size());
  double mean = 0;
  for (float r : rewards) mean += r;
  mean /= n;
  if (opt.estimator == Estimator::leave_one_out) {
    for (std::size_t i = 0; i < rewards.size(); ++i) {
      out[i] = rewards.size() == 1 ? double(rewards[i]) : (double(rewards[i]) - mean) * n / (n - 1);
    }
    return out;
  }
  double var = 0;
  for (float r : rewards) var += (r - mean) * (r - mean);
  const double scale = opt.std_normalize ? 1.0 / (std::sqrt(var / n) + opt.eps) : 1.0;
  for (std::size_t i = 0; i < rewards.size(); ++i) out[i] = (rewards[i] - mean) * scale;
  return out;
}

bool rewards_all_equal(std::span<const float> rewards) {
  return std::all_of(rewards.begin(), rewards.end(), [&](float r) { return r == rewards.front(); });
}

GroupRewards::GroupRewards(std::int64_t samples_per_prompt) : per_group_(samples_per_prompt) {
  if (samples_per_prompt < 1) throw std::invalid_argument("GroupRewards: samples_per_prompt must be at least 1");
}

bool GroupRewards::add(std::int64_t sample_id, float reward) {
  if (contains(sample_id)) return false;
  groups_[group_of(sample_id)].emplace_back(sample_id, reward);
  return true;
}

bool GroupRewards::contains(std::int64_t sample_id) const {
  auto it = groups_.find(group_of(sample_id));
  if (it == groups_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](const auto& p) { return p.first == sample_id; });
}

std::int64_t GroupRewards::count(std::int64_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : std::int64_t(it->second.size());
}

bool GroupRewards::complete(std::int64_t group) const { return count(group) == per_group_; }

double GroupRewards::advantage(std::int64_t sample_id, const GroupOptions& opt) const {
  const std::int64_t g = group_of(sample_id);
  if (!complete(g)) {
    throw std::logic_error(fmt::format("group {} has {} of its {} samples", g, count(g), per_group_));
  }
  const auto& members = groups_.at(g);
  std::vector<float> rewards;
  std::size_t self = members.size();
  for (std::size_t i = 0; i < members.size(); ++i) {
    rewards.push_back(members[i].second);
    if (members[i].first == sample_id) self = i;
  }
  if (self == members.size()) throw std::logic_error(fmt::format("sample {} has no recorded reward", sample_id));
  return group_advantages(rewards, opt)[self];
}

std::vector<std::int64_t> GroupRewards::incomplete_groups() const {
  std::vector<std::int64_t> out;
  for (const auto& [g, members] : groups_) {
    if (std::int64_t(members.size()) != per_group_) out.push_back(g);
  }
  return out;
}

void broadcast_group_advantages(const SequenceLayout& layout, std::span<const std::int64_t> sample_ids,
                                const GroupRewards& groups, const GroupOptions& opt, std::span<float> advantages) {
  constexpr const char* what = "broadcast_group_advantages";
  layout.check(what);
  layout.check_per_token(what, "advantages", advantages.size());
  if (sample_ids.size() != layout.size()) {
    throw std::invalid_argument(fmt::format("{}: {} sample ids for {} sequences", what, sample_ids.size(), layout.size()));
  }
  std::fill(advantages.begin(), advantages.end(), 0.0f);
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const float a = float(groups.advantage(sample_ids[i], opt));
    std::fill(advantages.begin() + std::ptrdiff_t(layout.response_begin(i)),
              advantages.begin() + std::ptrdiff_t(layout.end(i)), a);
  }
}

}  // namespace braid::rl
