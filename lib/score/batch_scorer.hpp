// Scoring one batch of samples: the reference, critic and reward passes, then the
// advantages of the algorithm (rl/algorithms.hpp) where a shard alone decides them (PPO's
// GAE, REINFORCE++'s returns-to-go). A group estimator (GRPO, RLOO, ...) needs every sample
// of a group, which may lie in other shards, so ShardStream (shard_stream.hpp) computes
// those once a group is whole.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "rl/algorithms.hpp"
#include "rl/gae.hpp"
#include "rl/grpo.hpp"
#include "score/model_passes.hpp"
#include "score/rule_reward.hpp"
#include "score/text_reward.hpp"
#include "tokenizer/tokenizer.hpp"

#include <memory>
#include <optional>
#include <string>

namespace braid::comm {
class Communicator;
}

namespace braid::score {

struct ScoreSettings {
  std::string algorithm = "ppo";  // a name of rl/algorithms.hpp
  rl::Estimator estimator = rl::Estimator::gae;
  bool std_normalize = true;      // group estimator: A = (R - mean) / (std + std_eps)
  // The KL penalty in the rewards (needs a reference model when > 0): per token under GAE
  // and returns-to-go, summed over the response (R' = R - kl_coef · Σ k) under a group estimator.
  double kl_coef = 0;
  backend::KlEstimator kl_estimator = backend::KlEstimator::k1;
  double gamma = 1.0;
  double lambda = 0.95;
  double std_eps = 1e-6;
  std::int64_t micro_tokens = 4096;
  // DAPO's overlong reward shaping: a response longer than max_new_tokens - buffer tokens
  // loses overlong_penalty · (excess / buffer) of reward, all of it at max_new_tokens.
  // buffer: overlong_buffer tokens, or (< 0) overlong_fraction of max_new_tokens; 0: off.
  std::int64_t overlong_buffer = -1;
  double overlong_fraction = 0;
  double overlong_penalty = 1.0;
  // The buffer for a generation of max_new_tokens (0: no shaping).
  std::int64_t overlong_buffer_for(std::int64_t max_new_tokens) const {
    return overlong_buffer >= 0 ? overlong_buffer
                                : static_cast<std::int64_t>(overlong_fraction * static_cast<double>(max_new_tokens));
  }

  bool uses_critic() const { return estimator == rl::Estimator::gae; }
  // Whether advantages need whole groups (sample_id / samples_per_prompt).
  bool grouped() const { return rl::grouped(estimator); }
  rl::GroupOptions group_options() const { return {.estimator = estimator, .std_normalize = std_normalize, .eps = std_eps}; }
};

// DAPO's soft overlong punishment of a response of `response_tokens` tokens (EOS
// included) under a generation cap of max_new_tokens: 0 up to max_new_tokens − buffer,
// then falling linearly to −factor at max_new_tokens (0 when buffer is 0).
double overlong_reward(std::int64_t response_tokens, std::int64_t max_new_tokens, std::int64_t buffer, double factor);

// The models a run scores with (not owned). PPO needs a critic; a reward comes from
// a reward model, a rule, or a text reward (text_reward.hpp: a rule, the math
// verifier, an external scorer), which read the sample decoded by the tokenizer.
struct ScoreModels {
  const model::Model* ref = nullptr;
  const model::Model* critic = nullptr;
  const model::Model* reward = nullptr;
  const RuleReward* rule = nullptr;
  TextReward* text = nullptr;
  const tok::Tokenizer* tokenizer = nullptr;
  // The tensor-parallel group the models are split over (nullptr at tp 1): its ranks
  // score the same batches together; a text reward runs on its rank 0 alone (one
  // external scorer per device, not per rank) and is broadcast to the others.
  comm::Communicator* tp_group = nullptr;
};

class BatchScorer {
 public:
  // std::invalid_argument for a combination the tool should have refused.
  BatchScorer(const ScoreModels& models, const ScoreSettings& settings);

  // InputError naming the file and the dataset when these models cannot score the batch:
  // no /logprobs/actor, a token outside a model's vocabulary, a sequence longer than a
  // model's positions.
  void check(const io::SampleBatch& b, const std::string& file) const;

  // Adds logprobs_ref (with a reference model), values (PPO), the reward (shaped when
  // overlong_buffer > 0), and, unless the estimator is a group's, the advantages and
  // returns. Without a critic, values are dropped.
  // `file` (the shard) and `prompts` (the prompt file it was generated from, "" when
  // not known) name a sample in messages; a text reward's problems with the samples'
  // prompt lines (a missing "answer") are an InputError before any pass runs.
  rl::PpoAdvantageSummary score(io::SampleBatch& b, const std::string& file = {}, const std::string& prompts = {},
                                std::int64_t max_new_tokens = 0);

  const ScoreSettings& settings() const { return settings_; }
  // The reward a group estimator compares for sequence i of a scored batch: /reward, less
  // the KL penalty when the settings put one in the rewards.
  float group_reward(const io::SampleBatch& b, std::size_t i) const;
  bool has_ref() const { return ref_ != nullptr; }
  bool has_critic() const { return critic_ != nullptr; }
  bool reward_by_model() const { return reward_ != nullptr; }
  // "model", "rule" or "command" (an external scorer).
  std::string reward_by() const;
  // Tells a text reward the run is over (an external scorer is waited for).
  void finish();
  // Seconds and tokens of each pass so far (the rule's decode-and-match counts as the reward pass).
  PassTiming ref_timing() const;
  PassTiming critic_timing() const;
  PassTiming reward_timing() const;

 private:
  ScoreModels models_;
  ScoreSettings settings_;
  std::unique_ptr<ReferencePass> ref_;
  std::unique_ptr<ValuePass> critic_;
  std::unique_ptr<RewardModelPass> reward_;
  std::unique_ptr<TextReward> wrapped_rule_;  // models.rule as a TextReward
  TextReward* text_ = nullptr;
  PassTiming rule_timing_;
};

}  // namespace braid::score
