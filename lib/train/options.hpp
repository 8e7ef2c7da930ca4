// braid-train's options, in one place: the command-line modes' (CommonTrainOptions,
// RlCommand, TextCommand, DpoCommand) and what they become for the loop (LoopOptions) and for one
// model's trainer (TrainerOptions).
#pragma once

#include "backend/dtype.hpp"
#include "core/json.hpp"
#include "optim/adamw.hpp"
#include "data/micro_batches.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::train {

struct CommonTrainOptions {
  double lr = 1e-5;
  std::int64_t warmup_steps = 0;
  // The learning rate after warmup (optim::LrSchedule): "constant", or a "cosine" or
  // "linear" decay to min_lr (for a second model, as PPO's critic, min_lr scaled by its
  // own peak / lr). The decay ends at the optimizer's global step total_steps when it is
  // given, else after lr_calls calls of this one's steps, counted from the step the
  // optimizer state is at (braid run passes the iterations left).
  std::string lr_schedule = "constant";
  double min_lr = 0.0;
  std::int64_t total_steps = 0;       // 0: from lr_calls
  std::int64_t lr_calls = 1;
  int epochs = 1;
  std::size_t mini_batch = 0;         // sequences per optimizer step (rm: pairs); 0 = all
  std::int64_t micro_tokens = 4096;
  // Activation recomputation (--recompute, model::ActivationOptions::recompute): 0 keeps every
  // layer's activations; k recomputes the layers whose index is a multiple of k in backward.
  int recompute = 0;
  // LoRA adapters on the trained models (--lora-rank > 0, model/lora.hpp): fresh ones on a base
  // checkpoint, or those of an adapter file given as the model (checkpoint/adapters.hpp).
  model::LoraOptions lora;
  std::uint64_t seed = 0;
  double max_grad_norm = 1.0;
  double weight_decay = 0.0;
  int threads = 0;                    // 0: all cores
  std::string device = "cpu";         // backend/registry.hpp
  backend::DType dtype = backend::DType::f32;   // storage of the weights (--dtype); masters stay f32
  std::string stats;                  // --stats file ("" = none)
  // Under mpirun without --schedule: train over every rank of the job, data parallel over
  // the devices (train/ranks.hpp). false: this process alone, as when one rank of a job
  // that does something else runs a mode by itself.
  bool data_parallel = true;
  // --tp: the tensor-parallel degree under mpirun; ranks = devices x tp (train/ranks.hpp;
  // with --schedule, the pipeline's devices x tp).
  int tp = 1;
  std::string created_by;             // the command line
  // What makes an output besides its inputs' contents: the options' values as given
  // (cli::option_values, filled by main), recorded in every output (io/fingerprint.hpp).
  ordered_json option_values = ordered_json::object();
  std::vector<std::string> options_given;   // of those, the ones given (cli::options_given)
  // An output already there is kept when the same inputs and options made it; made from
  // others it is refused (exit 2, naming what differs), or with force trained again.
  bool force = false;
  // The trained model's AdamW state (train/optimizer_state.hpp): "auto" (the state beside
  // the input checkpoint when this mode of braid-train made it, else fresh), "fresh", or
  // the path of a state (or of the checkpoint it lies beside).
  std::string optimizer_state = "auto";
};

// braid-train's policy modes (ppo, grpo, dr-grpo, dapo, gspo, rloo, reinforce++,
// reinforce++-baseline): rl_command(name) starts from the algorithm's preset
// (rl/algorithms.hpp), which the options then change.
struct RlCommand {
  CommonTrainOptions common;
  std::string algorithm = "ppo";      // a name of rl/algorithms.hpp
  std::vector<std::string> inputs;    // shards, "-" = paths on stdin
  std::string actor, critic, actor_out, critic_out;
  double critic_lr = 5e-5;
  // The ratio's clip range [1 − clip_low, 1 + clip_high]: each its own option, else --clip,
  // else the algorithm's (DAPO's clip-higher: 0.2 / 0.28).
  std::optional<double> clip, clip_low, clip_high;
  double preset_clip_low = 0.2, preset_clip_high = 0.2;
  double value_clip = 0.2;
  double entropy_coef = 0.0;
  double kl_coef = 0.0;               // β of the KL term in the loss (GRPO's 0.04 by its preset)
  std::string kl_estimator = "k3";    // k1 | k2 | k3
  std::string loss_agg = "token-mean";  // token-mean | seq-mean-token-sum | seq-mean-token-mean
  bool sequence_ratio = false;        // GSPO: the sequence's ratio and clip for every token
  // Truncated importance sampling against the generating engine (0: off): braid-train
  // recomputes the actor's logprobs before training (the proximal policy π_old the ratio
  // is taken against) and weighs each token's policy term by min(π_old / μ, tis_cap), μ the
  // logprob the generator recorded (/logprobs/actor).
  double tis_cap = 0.0;
  bool normalize_advantages = false;  // whiten advantages over the whole input before training
  std::string critic_optimizer_state = "auto";   // PPO: the critic's, as CommonTrainOptions::optimizer_state
  // DAPO's dynamic sampling (train/group_filter.hpp): drop groups whose rewards are all
  // equal; keep at most max_groups groups (0: all).
  bool filter_groups = false;
  std::int64_t max_groups = 0;
  std::string schedule;               // fused pipeline (not in the single-process trainer)
  std::int64_t max_staleness = -1;    // refuse tokens more steps behind the actor; < 0: no bound (train/staleness.hpp)
};

struct TextCommand {
  CommonTrainOptions common;
  std::string data;                   // JSON Lines ("-" = stdin)
  std::string model, model_out;       // --actor/--actor-out (sft), --reward/--reward-out (rm)
  std::string tokenizer = "byte";
  std::string tools;                  // a JSON file of tool schemas for conversations without "tools"
  std::string chat_template_kwargs;   // a JSON object of template keyword arguments, under each line's own
};

// braid-train dpo: preference pairs into a policy.
struct DpoCommand {
  TextCommand text;                   // data (pairs), --actor, --actor-out, --tokenizer, common options
  std::string ref;                    // --ref: the reference checkpoint; "" = --actor as read (before training)
  double beta = 0.1;                  // β (> 0)
  std::string loss = "sigmoid";       // "sigmoid" (DPO) | "ipo"
  bool length_normalize = false;      // a completion's logprob as the mean over its tokens
};

// How train_epochs walks the data (train/engine.hpp).
struct LoopOptions {
  int epochs = 1;
  std::size_t mini_batch = 0;   // sequences per optimizer step; 0: all of them (one step per epoch)
  std::uint64_t seed = 0;       // the shuffle of epoch e is Rng(seed, e)
  std::size_t group = 1;        // sequences that stay together (RM pairs)
};

// One model's optimizer and micro-batching (train/trainer.hpp). With data_parallel.comm
// of more than one rank the trainer is data parallel over it (train/trainer.hpp).
struct TrainerOptions {
  optim::AdamWConfig adamw;
  optim::LrSchedule lr;
  data::MicroBatchLimits micro;
  int recompute = 0;                  // model::ActivationOptions::recompute
  optim::DataParallel data_parallel;
  std::uint64_t seed = 0;             // LoRA dropout's draws (train/lora_dropout.hpp): the run's --seed
};

}  // namespace braid::train
