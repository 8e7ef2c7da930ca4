#include "rl/algorithms.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace braid::rl {
namespace {

using backend::KlEstimator;

std::vector<Algorithm> table() {
  std::vector<Algorithm> t;
  Algorithm ppo{.name = "ppo", .estimator = Estimator::gae, .critic = true, .kl_reward_coef = 0.05};
  t.push_back(ppo);
  Algorithm grpo{.name = "grpo", .estimator = Estimator::group, .std_normalize = true, .loss_agg = "seq-mean-token-mean",
                 .kl_loss_coef = 0.04};
  t.push_back(grpo);
  Algorithm dr{.name = "dr-grpo", .estimator = Estimator::group, .loss_agg = "seq-mean-token-sum"};
  t.push_back(dr);
  Algorithm dapo{.name = "dapo", .estimator = Estimator::group, .std_normalize = true, .clip_high = 0.28,
                 .filter_groups = true, .overlong_fraction = 0.2};
  t.push_back(dapo);
  Algorithm gspo{.name = "gspo", .estimator = Estimator::group, .std_normalize = true, .loss_agg = "seq-mean-token-mean",
                 .clip_low = 3e-4, .clip_high = 4e-4, .sequence_ratio = true};
  t.push_back(gspo);
  Algorithm rloo{.name = "rloo", .estimator = Estimator::leave_one_out, .kl_reward_coef = 0.01};
  t.push_back(rloo);
  Algorithm rpp{.name = "reinforce++", .estimator = Estimator::returns_to_go, .whiten = true, .kl_reward_coef = 0.01};
  t.push_back(rpp);
  Algorithm rppb{.name = "reinforce++-baseline", .estimator = Estimator::group, .whiten = true, .kl_reward_coef = 0.01};
  t.push_back(rppb);
  return t;
}

const std::vector<Algorithm>& algorithms() {
  static const std::vector<Algorithm> t = table();
  return t;
}

}  // namespace

std::optional<Algorithm> algorithm_named(std::string_view name) {
  for (const Algorithm& a : algorithms()) {
    if (a.name == name) return a;
  }
  return std::nullopt;
}

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Algorithm& a : algorithms()) n.push_back(a.name);
    return n;
  }();
  return names;
}

std::string algorithm_list() { return fmt::format("{}", fmt::join(algorithm_names(), ", ")); }

std::optional<KlEstimator> kl_estimator_named(std::string_view name) {
  for (const KlEstimator k : {KlEstimator::k1, KlEstimator::k2, KlEstimator::k3}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

const char* to_string(KlEstimator k) {
  switch (k) {
    case KlEstimator::k1: return "k1";
    case KlEstimator::k2: return "k2";
    case KlEstimator::k3: return "k3";
  }
  return "?";
}

}  // namespace braid::rl
