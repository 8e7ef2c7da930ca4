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
//  "seconds": {"generate","score","train"[,"eval"]}, "train": {"actor_train.loss", ...: the train calls' figures},
//  "eval": {"accuracy", "pass@1", "pass@N", "mean_reward", ...: braid eval's figures, when the iteration was evaluated}}
ordered_json iteration_metrics(const Layout& layout, int iteration);

// Iteration 0's line when the start actor was evaluated: {"iteration": 0, "seconds": {"eval"}, "eval": {...}};
// nullopt otherwise.
std::optional<ordered_json> start_metrics(const Layout& layout);

// "iter 3: reward 0.412  len 17.3  kl 0.0123  | policy_loss ...  | gen 4.1s score 2.0s train 6.3s"
std::string summary_line(const ordered_json& metrics);

}  // namespace braid::driver
