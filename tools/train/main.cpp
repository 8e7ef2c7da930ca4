// braid-train: PPO, GRPO, SFT, reward-model and DPO updates (lib/train/commands.hpp).
#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "comm/mpi.hpp"
#include "core/cli.hpp"
#include "core/shell.hpp"
#include "rl/algorithms.hpp"
#include "train/commands.hpp"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

namespace {

using braid::train::CommonTrainOptions;

void add_common(CLI::App* sub, CommonTrainOptions& o, double default_lr) {
  o.lr = default_lr;
  sub->add_option("--lr", o.lr, "Peak learning rate (AdamW; after warmup, see --lr-schedule)")->capture_default_str();
  sub->add_option("--warmup-steps", o.warmup_steps, "Linear warmup over this many optimizer steps (the optimizer's global "
                                                     "step, as its state records it)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--lr-schedule", o.lr_schedule, "After warmup: constant, or a cosine or linear decay to --min-lr")
      ->check(CLI::IsMember({"constant", "cosine", "linear"}))
      ->capture_default_str();
  sub->add_option("--min-lr", o.min_lr, "Where the decay ends (a second model's, as PPO's critic, scaled by its peak / --lr)")
      ->capture_default_str();
  sub->add_option("--total-steps", o.total_steps, "The optimizer's global step at which the decay reaches --min-lr "
                                                   "(0: after --lr-calls calls of this one's steps)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--lr-calls", o.lr_calls, "The decay spans this call and this many - 1 more of the same size, from "
                                             "the step the optimizer state is at (braid run passes the iterations left)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--epochs", o.epochs, "Passes over the data")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--mini-batch", o.mini_batch, "Sequences per optimizer step (rm, dpo: pairs); 0 = all of them")
      ->capture_default_str();
  sub->add_option("--micro-tokens", o.micro_tokens, "Tokens per micro-batch (gradients accumulate over them)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--recompute", o.recompute, "Activation recomputation: 0 keeps every layer's activations for the "
                                               "backward; k recomputes the layers whose index is a multiple of k "
                                               "(1: every layer), the same results with less memory and more time")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--lora-rank", o.lora.rank, "LoRA: train adapters of this rank on the linear layers, the base "
                                              "frozen (0: train every weight); the output is an adapter file naming "
                                              "its base. A model given as an adapter file continues its adapters")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--lora-alpha", o.lora.alpha, "LoRA: the adapters' scale is alpha / rank (alpha / sqrt(rank) with "
                                                "--rslora)")
      ->capture_default_str();
  sub->add_flag("--rslora", o.lora.rslora, "LoRA: scale the adapters by alpha / sqrt(rank) (rsLoRA)");
  sub->add_option_function<std::string>(
         "--lora-targets",
         [&o](const std::string& list) {
           try {
             o.lora.targets = braid::model::parse_lora_targets(list);
           } catch (const std::invalid_argument& e) {
             throw CLI::ValidationError("--lora-targets", e.what());
           }
         },
         "LoRA: the linear layers that get adapters, a comma-separated list of q, k, v, o, gate, up, down (or all)")
      ->default_str("all");
  sub->add_option("--seed", o.seed, "Seed of the mini-batch shuffle")->capture_default_str();
  sub->add_option("--max-grad-norm", o.max_grad_norm, "Clip gradients to this global norm (<= 0: no clipping)")
      ->capture_default_str();
  sub->add_option("--weight-decay", o.weight_decay, "AdamW's decoupled weight decay (matrices only)")
      ->capture_default_str();
  sub->add_option("--threads", o.threads, "CPU threads (0: all cores)")->capture_default_str();
  sub->add_option("--tp", o.tp, "Tensor-parallel degree under mpirun: ranks = devices x tp, each model split over the "
                                 "tp ranks of a device, the devices data parallel (with --schedule: the schedule's "
                                 "devices)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  braid::backend::add_device_option(*sub, o.device);
  braid::backend::add_dtype_option(*sub, o.dtype);
  sub->add_option("--stats", o.stats, "Write timings and per-step losses (braid.stagestats JSON) to this file");
  sub->add_flag("--force", o.force, "Train even when an output is already there, made from other inputs or options "
                                    "(without it such an output is refused, naming what differs; one made from the "
                                    "same is kept and training skipped)");
  sub->add_option("--optimizer-state", o.optimizer_state,
                  "The trained model's AdamW state: auto (the state beside the input checkpoint when this mode of "
                  "braid-train made it; a new stage, as DPO or PPO after SFT, starts fresh), fresh, or the path of a "
                  "state file (or of the checkpoint it lies beside)")
      ->capture_default_str();
}

// The options an output's record leaves out: the outputs, the inputs (recorded by their
// contents), and the settings that change how the work is cut, not its result.
const std::vector<std::string> kNotInRecord = {
    "shards", "data", "--actor", "--critic", "--reward", "--ref", "--tokenizer", "--optimizer-state",
    "--critic-optimizer-state", "--actor-out", "--critic-out", "--reward-out", "--stats", "--threads", "--device",
    "--tp", "--micro-tokens", "--recompute", "--schedule", "--force"};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"braid-train: update a policy (PPO, GRPO, SFT, DPO) or a reward model from samples; writes new checkpoints "
               "(step + 1) with their AdamW state beside them (<stem>.optim.h5) and prints the checkpoint files. Under mpirun "
               "without --schedule every mode runs over ranks = devices x --tp: each model split over the tp ranks of a "
               "device, the devices data parallel (device 0 writes the checkpoints, one file per tp rank)",
               "braid-train"};
  braid::cli::add_common_options(app);
  app.require_subcommand(1);
  app.fallthrough();

  std::vector<std::string> words(argv, argv + argc);
  if (!words.empty()) words.front() = "braid-train";
  const std::string command_line = braid::shell_line(words);

  // One mode per algorithm (rl/algorithms.hpp), each starting from its preset.
  const std::map<std::string, std::string> about = {
      {"ppo", "PPO: the actor by the clipped policy loss, the critic by the clipped value loss, one AdamW step each "
              "per mini-batch, from scored shards"},
      {"grpo", "GRPO (DeepSeekMath): the clipped policy loss, a mean over sequences of token means, with a k3 KL term "
               "to the reference, from shards scored with --algorithm grpo"},
      {"dr-grpo", "Dr. GRPO (Liu et al. 2025): GRPO without the length and std normalisations (a mean over sequences "
                  "of token sums), from shards scored with --algorithm dr-grpo"},
      {"dapo", "DAPO (Yu et al. 2025): clip-higher (0.2 / 0.28), a mean over tokens, groups whose rewards are all "
               "equal dropped (dynamic sampling), from shards scored with --algorithm dapo"},
      {"gspo", "GSPO (Zheng et al. 2025): the sequence's importance ratio (geometric mean of its tokens') clipped "
               "as a whole, from shards scored with --algorithm gspo"},
      {"rloo", "RLOO (Ahmadian et al. 2024): the clipped policy loss on leave-one-out advantages, from shards "
               "scored with --algorithm rloo"},
      {"reinforce++", "REINFORCE++ (Hu 2025): returns-to-go whitened over the batch, the clipped policy loss, from "
                      "shards scored with --algorithm reinforce++"},
      {"reinforce++-baseline", "REINFORCE++-baseline: group-mean advantages whitened over the batch, from shards "
                               "scored with --algorithm reinforce++-baseline"}};
  std::vector<std::pair<CLI::App*, braid::train::RlCommand>> rl_modes;
  rl_modes.reserve(braid::rl::algorithm_names().size());
  for (const auto& name : braid::rl::algorithm_names()) {
    rl_modes.emplace_back(app.add_subcommand(name, about.at(name)), braid::train::rl_command(name));
  }
  for (auto& [sub, o] : rl_modes) {
    const bool ppo = braid::train::trains_critic(o);
    sub->add_option("shards", o.inputs, "Scored sample shards, or - to read their paths from stdin (one a line)")
        ->required();
    sub->add_option("--actor", o.actor, "Actor checkpoint (a weight file or the stem of stage files)")->required();
    sub->add_option("--actor-out", o.actor_out, "New actor checkpoint to write")->required();
    sub->add_option("--clip", o.clip, fmt::format("ε of the clipped policy ratio, both sides (default {} / {})",
                                                  o.preset_clip_low, o.preset_clip_high));
    sub->add_option("--clip-low", o.clip_low, "ε below 1 (the ratio's floor 1 - ε; default --clip)");
    sub->add_option("--clip-high", o.clip_high, "ε above 1 (DAPO's clip-higher; at least --clip-low; default --clip)");
    sub->add_option("--loss-agg", o.loss_agg, "How token losses become the mini-batch's: token-mean, "
                                              "seq-mean-token-sum or seq-mean-token-mean")
        ->check(CLI::IsMember({"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"}))
        ->capture_default_str();
    sub->add_option("--entropy-coef", o.entropy_coef, "Weight of the entropy bonus")->capture_default_str();
    sub->add_option("--kl-coef", o.kl_coef, "β of the KL term to the reference in the loss (needs /logprobs/ref: "
                                            "score with --ref)")
        ->capture_default_str();
    sub->add_option("--kl-estimator", o.kl_estimator, "The loss's estimate of KL from d = logp - ref: k1 (d), "
                                                      "k2 (d^2/2) or k3 (exp(-d) + d - 1)")
        ->check(CLI::IsMember({"k1", "k2", "k3"}))
        ->capture_default_str();
    sub->add_flag("--sequence-ratio,!--token-ratio", o.sequence_ratio,
                  "GSPO's ratio: each token takes its sequence's (the geometric mean of the tokens' ratios), clipped "
                  "as a whole")
        ->capture_default_str();
    sub->add_option("--tis-cap", o.tis_cap, "Truncated importance sampling (0: off): recompute the actor's logprobs "
                                            "before training and weigh each token by min(pi_old / pi_generator, CAP)")
        ->capture_default_str();
    sub->add_option("--schedule", o.schedule, "schedule.json: run the fused actor+critic pipeline (under mpirun)");
    sub->add_option("--max-staleness", o.max_staleness,
                    "Refuse samples with a token sampled more than N steps before the actor's (the shards' "
                    "/policy_step; -1: no bound). The stats file records the staleness either way")
        ->capture_default_str();
    sub->add_flag("--normalize-advantages,!--no-normalize-advantages", o.normalize_advantages,
                  "Whiten the advantages over all response tokens of the input (mean 0, std 1) before training")
        ->capture_default_str();
    sub->add_flag("--filter-groups,!--no-filter-groups", o.filter_groups,
                  "Drop the groups (one prompt's samples) whose rewards are all equal (DAPO's dynamic sampling)")
        ->capture_default_str();
    sub->add_option("--max-groups", o.max_groups, "Train on at most this many groups, the first in the prompt "
                                                  "stream (0: all)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    add_common(sub, o.common, 1e-5);
    if (!ppo) continue;
    sub->add_option("--critic", o.critic, "Critic checkpoint (with a value head)")->required();
    sub->add_option("--critic-out", o.critic_out, "New critic checkpoint to write")->required();
    sub->add_option("--critic-lr", o.critic_lr, "The critic's learning rate")->capture_default_str();
    sub->add_option("--value-clip", o.value_clip, "ε of the clipped value loss (<= 0: unclipped)")
        ->capture_default_str();
    sub->add_option("--critic-optimizer-state", o.critic_optimizer_state,
                    "The critic's AdamW state, as --optimizer-state is the actor's")
        ->capture_default_str();
  }

  braid::train::TextCommand sft, rm;
  auto* sft_cmd = app.add_subcommand("sft", "Supervised fine-tuning on {\"prompt\",\"response\"} JSON lines (the "
                                            "response tokens are learnt)");
  sft_cmd->add_option("data", sft.data, "JSON Lines file, - for stdin")->required();
  sft_cmd->add_option("--actor", sft.model, "Policy checkpoint (with an LM head)")->required();
  sft_cmd->add_option("--actor-out", sft.model_out, "New checkpoint to write")->required();
  auto* rm_cmd = app.add_subcommand("rm", "Reward-model training on {\"prompt\",\"chosen\",\"rejected\"} JSON lines "
                                          "(pairwise loss -log sigmoid(r_chosen - r_rejected))");
  rm_cmd->add_option("data", rm.data, "JSON Lines file, - for stdin")->required();
  rm_cmd->add_option("--reward", rm.model, "Reward model checkpoint (with a value head)")->required();
  rm_cmd->add_option("--reward-out", rm.model_out, "New checkpoint to write")->required();
  braid::train::DpoCommand dpo;
  auto* dpo_cmd = app.add_subcommand("dpo", "Direct preference optimisation of a policy on {\"prompt\",\"chosen\","
                                            "\"rejected\"} JSON lines, against the reference's logprobs computed once "
                                            "before training");
  dpo_cmd->add_option("data", dpo.text.data, "JSON Lines file, - for stdin")->required();
  dpo_cmd->add_option("--actor", dpo.text.model, "Policy checkpoint (with an LM head)")->required();
  dpo_cmd->add_option("--actor-out", dpo.text.model_out, "New checkpoint to write")->required();
  dpo_cmd->add_option("--ref", dpo.ref, "Reference policy checkpoint (default: --actor as read, before training)");
  dpo_cmd->add_option("--beta", dpo.beta, "β: the implicit reward's scale (> 0; IPO's τ)")->capture_default_str();
  dpo_cmd->add_option("--dpo-loss", dpo.loss, "sigmoid: -log σ(β·z) (DPO); ipo: (z - 1/(2β))²")
      ->check(CLI::IsMember({"sigmoid", "ipo"}))
      ->capture_default_str();
  dpo_cmd->add_flag("--length-normalize", dpo.length_normalize,
                    "A completion's logprob as the mean over its tokens, not the sum");
  for (auto [sub, o] : {std::pair{sft_cmd, &sft}, std::pair{rm_cmd, &rm}, std::pair{dpo_cmd, &dpo.text}}) {
    sub->add_option("--tokenizer", o->tokenizer, "byte, or a tokenizer.json (or a folder holding one)")
        ->capture_default_str();
    sub->add_option("--tools", o->tools, "A JSON file of tool schemas for the conversations without \"tools\"");
    sub->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                    "Chat template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": false}' (a "
                    "line's own \"chat_template_kwargs\" win)");
    add_common(sub, o->common, sub == dpo_cmd ? 1e-6 : 1e-5);
  }

  // MPI starts only after parsing: the launcher says which rank prints usage.
  braid::cli::set_first_process(braid::comm::launcher_rank() == 0);
  return braid::cli::run(app, argc, argv, [&] {
    const auto record = [&](CLI::App* sub, CommonTrainOptions& o) {
      o.created_by = command_line;
      if (!sub->parsed()) return;
      o.option_values = braid::cli::option_values(*sub, kNotInRecord);
      o.options_given = braid::cli::options_given(*sub, kNotInRecord);
    };
    for (auto [sub, o] : {std::pair{sft_cmd, &sft.common}, std::pair{rm_cmd, &rm.common},
                          std::pair{dpo_cmd, &dpo.text.common}}) {
      record(sub, *o);
    }
    for (auto& [sub, o] : rl_modes) {
      record(sub, o.common);
      if (sub->parsed()) return braid::train::run_rl(o);
    }
    if (sft_cmd->parsed()) return braid::train::run_sft(sft);
    if (dpo_cmd->parsed()) return braid::train::run_dpo(dpo);
    return braid::train::run_rm(rm);
  });
}
