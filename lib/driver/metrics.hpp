// What one iteration did, in numbers: the mean reward, response length and KL
// read from its scored shards, the seconds of each stage and the training
// figures read from the tools' --stats files. `braid run` prints it as one line
// and gathers the iterations in OUT/metrics.jsonl.
#pragma once

#include <optional>
#include <string>

#include "core/json.hpp"
#include "driver/layout.hpp"

namespace braid::driver {

// {"iteration", "sequences", "response_tokens", "mean_reward", "mean_response_length",
//  "kl" (mean over response tokens of logprob_actor - logprob_ref; absent without a ref),
//  "kl_coef" (PPO: the KL penalty coefficient braid-score used, from the shards' config),
//  "seconds": {"generate","score","train"[,"eval"]: each stage tool's wall time; "iteration": the
//              driver's wall time for the iteration's steps when it ran them (under async: from
//              the end of the previous training to the end of this one, the next rollout beside)},
//  "train": {"actor_train.loss", ...: the train calls' figures},
//  "overcommit": generate's {"batch_groups", "fresh_samples", "resumed_samples", "resumed_tokens",
//                "carried_finished", "deferred_samples", "deferred_partial", "deferred_finished", ...}
//                (with overcommit only),
//  "staleness": train's {"max", "mean", "stale_tokens", "tokens"} (steps behind the trained actor),
//  "eval": {"accuracy", "pass@1", "pass@N", "mean_reward", ...: braid eval's figures, when the iteration was evaluated}}
ordered_json iteration_metrics(const Layout& layout, int iteration, std::optional<double> wall_seconds = std::nullopt);

// Iteration 0's line when the start actor was evaluated: {"iteration": 0, "seconds": {"eval"}, "eval": {...}};
// nullopt otherwise.
std::optional<ordered_json> start_metrics(const Layout& layout);

// "iter 3: reward 0.412  len 17.3  kl 0.0123  | policy_loss ...  | gen 4.1s score 2.0s train 6.3s"
std::string summary_line(const ordered_json& metrics);

}  // namespace braid::driver
