// braid-train's modes, as functions of their options (tools/train/main.cpp is the CLI).
//
//   ppo   scored shards → actor (clipped policy loss) and critic (clipped value loss),
//         one AdamW step each per mini-batch
//   grpo  scored shards → actor (clipped policy loss + β·KL to ref, sequence mean)
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
#include "train/options.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::train {

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
