// `braid eval`: how good a checkpoint is on held-out data, as numbers.
//
//   a policy       generates n samples for every prompt of a held-out prompt file (greedy,
//                  or sampled with a seed), scores each with a text reward (a rule such as
//                  the math verifier, or the user's scorer command: score/text_reward.hpp),
//                  and reports the mean reward, pass@1 (the fraction of samples that are
//                  right) and pass@n (the fraction of prompts with at least one right
//                  sample), the mean response length, and the same per value of a prompt
//                  field (--by digits: accuracy against the task's length)
//                  and pass@k for every k <= n (Chen et al. 2021's unbiased estimator) and
//                  maj@k (a majority vote over the final answers of k samples)
//   a reward model scores both completions of every held-out preference pair and reports
//                  the fraction of pairs whose chosen completion scores higher, and the
//                  mean margin r_chosen - r_rejected
//   a DPO policy   the same for its implicit reward β·(log π − log π_ref) against a
//                  reference policy (--ref)
//
// A sample is right when its reward is at least `correct_at` (1: the verifier's "equal").
// The result is a braid.eval JSON document (docs/tools/eval.md); every number is finite.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/dtype.hpp"
#include "core/json.hpp"

namespace braid::eval {

inline constexpr const char* kEvalFormat = "braid.eval";
inline constexpr int kEvalVersion = 1;

struct ModelRun {
  std::string checkpoint;
  std::string tokenizer = "byte";
  std::string tools;                 // a JSON file of tool schemas for conversations without "tools"
  std::string chat_template_kwargs;  // a JSON object of template keyword arguments, under each line's own
  std::string device = "cpu";
  int threads = 0;
  backend::DType dtype = backend::DType::f32;
  std::int64_t micro_tokens = 4096;
};

struct PolicyEvalOptions {
  ModelRun model;
  std::string prompts;
  std::string reward_rule;              // --reward-rule SPEC (one of rule / command)
  std::string reward_cmd;               // --reward-cmd CMD
  std::string reward_cmd_dir;
  std::optional<double> reward_cmd_timeout;
  int samples = 1;
  double temperature = 0;               // 0: greedy
  double top_p = 1;
  int top_k = 0;
  std::uint64_t seed = 0;
  std::int64_t max_new_tokens = 64;
  int max_batch = 64;
  std::int64_t limit = 0;               // the first `limit` prompts (0: all)
  double correct_at = 1.0;
  std::string by;                       // a prompt field to break the figures down by ("" = none)
  std::vector<int> k;                   // also "pass@K" and "maj@K" keys for these K (each 1..samples)
};

struct PairEvalOptions {
  ModelRun model;
  std::string pairs;
  // A policy's implicit reward instead of a reward model's (DPO): the reference's checkpoint.
  std::string ref;
  double beta = 0.1;
  bool length_normalize = false;   // a completion's logprob as the mean over its tokens
};

// pass@k estimated from n samples of which c are right (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).
double pass_at_k(int n, int c, int k);

// maj@k of one prompt's n samples: the samples in ⌊n/k⌋ disjoint blocks of k, in order;
// a block is right when its most frequent answer (keys[i]; ties to the answer seen first,
// samples without one not voting) is a right one; the fraction of right blocks. 0 when
// k > n.
double maj_at_k(const std::vector<std::optional<std::string>>& keys, const std::vector<bool>& right, int k);

// {"format","version","kind":"policy","checkpoint","step","prompts","samples_per_prompt",
//  "greedy","mean_reward","accuracy" (= pass@1),"pass@1","pass@n", "pass@K" and "maj@K" for each
//  K of o.k,"pass_at_k" [k = 1..n],"maj_at_k" [k = 1..n],"mean_response_length","seconds", optional "by": {"field", "groups":
//  {value: {"prompts","pass@1","pass@n","pass_at_k","maj_at_k","mean_reward",...}}}}
// UsageError naming --k when a K of o.k is outside 1..samples.
ordered_json evaluate_policy(const PolicyEvalOptions& o);

// The problem with pass@K / maj@K for these K from n samples ("k = 16 is above the 8 samples
// per prompt: pass@k needs k <= n"), nullopt when there is none.
std::optional<std::string> k_problem(const std::vector<int>& k, int samples);

// {"format","version","kind":"reward_model","checkpoint","step","pairs","accuracy","mean_margin",
//  "mean_chosen","mean_rejected","seconds"}
ordered_json evaluate_reward_model(const PairEvalOptions& o);

// {"format","version","kind":"dpo_policy","checkpoint","step","ref","beta","pairs","accuracy",
//  "mean_margin","mean_chosen","mean_rejected","loss","logp_accuracy","seconds"}: o.ref given.
ordered_json evaluate_dpo_policy(const PairEvalOptions& o);

}  // namespace braid::eval
