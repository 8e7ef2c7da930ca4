// braid-train's modes, as functions of their options (tools/train/main.cpp is the CLI).
//
//   ppo   scored shards → actor (clipped policy loss) and critic (clipped value loss),
//         one AdamW step each per mini-batch
//   grpo  scored shards → actor (clipped policy loss + β·KL to ref, sequence mean)
//   sft   {"prompt","response"} lines → actor (NLL of the response)
//   rm    {"prompt","chosen","rejected"} lines → reward model (−log σ(r_c − r_r))
//
// Each reads its input checkpoint(s) and their optimizer state when present, trains,
// and writes new checkpoints of step + 1 with their optimizer state; the weight files
// go to stdout, one a line.
#pragma once

#include "backend/dtype.hpp"
#include "io/sample_batch.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::train {

struct CommonTrainOptions {
  double lr = 1e-5;
  std::int64_t warmup_steps = 0;
  int epochs = 1;
  std::size_t mini_batch = 0;         // sequences per optimizer step (rm: pairs); 0 = all
  std::int64_t micro_tokens = 4096;
  std::uint64_t seed = 0;
  double max_grad_norm = 1.0;
  double weight_decay = 0.0;
  int threads = 0;                    // 0: all cores
  backend::DType dtype = backend::DType::f32;   // storage of the weights (--dtype); masters stay f32
  std::string stats;                  // --stats file ("" = none)
  std::string created_by;             // the command line
};

struct RlCommand {
  CommonTrainOptions common;
  std::string algorithm = "ppo";      // "ppo" | "grpo"
  std::vector<std::string> inputs;    // shards, "-" = paths on stdin
  std::string actor, critic, actor_out, critic_out;
  double critic_lr = 5e-5;
  double clip = 0.2;
  double value_clip = 0.2;
  double entropy_coef = 0.0;
  double kl_coef = 0.04;              // GRPO only
  bool normalize_advantages = false;  // whiten advantages over the whole input before training
  std::string schedule;               // fused pipeline (not in the single-process trainer)
};
int run_rl(const RlCommand& c);
// The per-token arrays a mode's shards must hold.
std::vector<std::string> required_arrays(const RlCommand& c);
// --normalize-advantages: whitens b's advantages over its response tokens and logs what it removed.
void prepare_advantages(const RlCommand& c, io::SampleBatch& b);

struct TextCommand {
  CommonTrainOptions common;
  std::string data;                   // JSON Lines ("-" = stdin)
  std::string model, model_out;       // --actor/--actor-out (sft), --reward/--reward-out (rm)
  std::string tokenizer = "byte";
};
int run_sft(const TextCommand& c);
int run_rm(const TextCommand& c);

}  // namespace braid::train
