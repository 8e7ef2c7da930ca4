// braid-train's modes, as functions of their options (tools/train/main.cpp is the CLI).
//
//   ppo   scored shards → actor (clipped policy loss) and critic (clipped value loss),
//         one AdamW step each per mini-batch
//   grpo, dr-grpo, dapo, gspo, rloo, reinforce++, reinforce++-baseline
//         scored shards → actor: the policy loss under each algorithm's preset
//         (rl/algorithms.hpp; aggregation, clip range, KL, sequence ratio, whitening)
//   sft   {"prompt","response"} lines → actor (NLL of the response)
//   rm    {"prompt","chosen","rejected"} lines → reward model (−log σ(r_c − r_r))
//   dpo   {"prompt","chosen","rejected"} lines → actor (DPO or IPO against the reference's
//         logprobs, computed once before training)
//
// Each reads its input checkpoint(s) and their optimizer state when present, trains,
// and writes new checkpoints of step + 1 with their optimizer state; the weight files
// go to stdout, one a line.
#pragma once

#include "backend/dtype.hpp"
#include "backend/backend.hpp"
#include "io/sample_batch.hpp"
#include "train/objectives.hpp"
#include "train/options.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::train {

// A policy mode's command with the defaults of its algorithm's preset; UsageError for a
// name that is not an algorithm.
RlCommand rl_command(const std::string& algorithm);
// The actor's objective the options ask for; UsageError naming the option for one that
// cannot be (--clip-high below --clip-low, an unknown --loss-agg or --kl-estimator, ...).
PolicyObjectiveOptions actor_objective_options(const RlCommand& c);
// Whether the mode trains a critic (ppo).
bool trains_critic(const RlCommand& c);

int run_rl(const RlCommand& c);
// The per-token arrays a mode's shards must hold.
std::vector<std::string> required_arrays(const RlCommand& c);
// --normalize-advantages: whitens b's advantages over its response tokens (the backend's
// whiten op) and logs what it removed.
void prepare_advantages(const RlCommand& c, backend::Backend& be, io::SampleBatch& b);

int run_sft(const TextCommand& c);
int run_rm(const TextCommand& c);
int run_dpo(const DpoCommand& c);

}  // namespace braid::train
