// Every objective braid-train has (PPO actor and critic, GRPO, reward model, SFT, DPO), as
// the tests that train one model in two ways (split into micro-batches, data parallel,
// tensor parallel) run each of them, and the shuffled mini-batches of whole groups they
// train on.
#pragma once

#include "core/rng.hpp"
#include "train/objectives.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace braid::test {

struct ObjectiveCase {
  const char* name;
  bool value_head;
  std::size_t group;  // sequences that stay together (RM and DPO pairs)
  std::function<std::unique_ptr<train::Objective>()> make;
};

inline std::vector<ObjectiveCase> objective_cases() {
  return {
      {"ppo actor", false, 1, [] { return std::make_unique<train::PolicyObjective>(train::ppo_actor_options(0.2, 0.01)); }},
      {"ppo critic", true, 1, [] { return std::make_unique<train::ValueObjective>(0.2); }},
      {"grpo actor", false, 1, [] { return std::make_unique<train::PolicyObjective>(train::grpo_actor_options(0.2, 0.1)); }},
      {"reward model", true, 2, [] { return std::make_unique<train::PairwiseRewardObjective>(); }},
      {"sft", false, 1, [] { return std::make_unique<train::SftObjective>(16); }},
      {"dpo", false, 2,
       [] { return std::make_unique<train::DpoObjective>(train::DpoObjectiveOptions{.loss = {.beta = 0.5}, .head_chunk_rows = 16}); }},
  };
}

// Mini-batches of whole groups of `group` sequences, the groups in a shuffled order
// (Rng(3)): for each {first, count} of `takes`, the sequences of groups first ..
// first + count - 1 of that order (count 0: every group).
inline std::vector<std::vector<std::size_t>> group_mini_batches(std::size_t sequences, std::size_t group,
                                                                std::span<const std::pair<std::size_t, std::size_t>> takes) {
  std::vector<std::size_t> order(sequences / group);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(3);
  rng.shuffle(std::span<std::size_t>(order));
  std::vector<std::vector<std::size_t>> out;
  for (auto [first, count] : takes) {
    std::vector<std::size_t>& idx = out.emplace_back();
    const std::size_t end = count == 0 ? order.size() : first + count;
    for (std::size_t g = first; g < end; ++g)
      for (std::size_t k = 0; k < group; ++k) idx.push_back(order[g] * group + k);
  }
  return out;
}

// Options that make every difference show: a constant lr of 1e-2 with AdamW's eps 1e-3,
// clipping at 0.5 (the norm must be the whole job's), weight decay, micro-batches of 64
// tokens and short gradient buckets (several a step).
inline train::TrainerOptions parallel_options(std::size_t group, comm::Communicator* dp) {
  train::TrainerOptions opt;
  opt.lr = {.peak_lr = 1e-2, .min_lr = 1e-2, .kind = optim::LrSchedule::Kind::constant};
  opt.adamw.eps = 1e-3;
  opt.adamw.max_grad_norm = 0.5;
  opt.adamw.weight_decay = 0.05;
  opt.micro = {.max_tokens = 64, .max_sequences = 0, .group = group};
  opt.data_parallel = {.comm = dp, .bucket_elements = 1000};
  return opt;
}

// Per step of two trainings of the same batches: the same loss and gradient norm (within
// 1e-5 relative), tokens, sequences and metrics (within 1e-4).
inline void expect_same_steps(const std::string& name, const std::vector<train::StepStats>& one,
                              const std::vector<train::StepStats>& other) {
  BOOST_REQUIRE_EQUAL(one.size(), other.size());
  for (std::size_t s = 0; s < one.size(); ++s) {
    const auto &a = one[s], &b = other[s];
    BOOST_TEST_MESSAGE("  step " << s << ": loss " << a.loss << " vs " << b.loss << ", |g| " << a.grad_norm << " vs "
                                 << b.grad_norm);
    BOOST_TEST(b.loss == a.loss, name << " step " << s << boost::test_tools::tolerance(1e-5));
    BOOST_TEST(b.grad_norm == a.grad_norm, name << " step " << s << boost::test_tools::tolerance(1e-5));
    BOOST_TEST(b.tokens == a.tokens);
    BOOST_TEST(b.sequences == a.sequences);
    for (const auto& [k, v] : a.metrics) {
      BOOST_REQUIRE(b.metrics.count(k) == 1);
      BOOST_TEST(b.metrics.at(k) == v, name << " step " << s << " metric " << k << boost::test_tools::tolerance(1e-4));
    }
  }
}

}  // namespace braid::test
