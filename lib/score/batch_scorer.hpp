// Scoring one batch of samples: the reference, critic and reward passes, then PPO's
// advantages. GRPO's advantages need every sample of a group, which may lie in other
// shards, so ShardStream (shard_stream.hpp) computes them once a group is whole.
#pragma once

#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "rl/gae.hpp"
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

enum class Algorithm { ppo, grpo };
const char* to_string(Algorithm a);

struct ScoreSettings {
  Algorithm algorithm = Algorithm::ppo;
  double kl_coef = 0;           // PPO's per-token KL penalty (needs a reference model when > 0)
  double gamma = 1.0;
  double lambda = 0.95;
  double std_eps = 1e-6;        // GRPO: A = (R - mean) / (std + std_eps)
  std::int64_t micro_tokens = 4096;
};

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

  // Adds logprobs_ref (with a reference model), values (PPO), the reward, and for PPO
  // the advantages and returns. For GRPO, values are dropped (there is no critic).
  // `file` (the shard) and `prompts` (the prompt file it was generated from, "" when
  // not known) name a sample in messages; a text reward's problems with the samples'
  // prompt lines (a missing "answer") are an InputError before any pass runs.
  rl::PpoAdvantageSummary score(io::SampleBatch& b, const std::string& file = {}, const std::string& prompts = {});

  const ScoreSettings& settings() const { return settings_; }
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
