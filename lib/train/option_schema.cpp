#include "train/option_schema.hpp"

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "model/lora.hpp"
#include "rl/algorithms.hpp"
#include "train/commands.hpp"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace braid::train {
namespace {

using cli::field;
using cli::custom;
using cli::kMaxCount;
using cli::OptionSpec;
using namespace cli::option_types;
using Common = CommonTrainOptions;

// Coefficients above 100 are far past any useful value: a larger one is a typo. A learning
// rate of 0 makes a step that changes nothing (a loss measured as it is) and a huge one
// makes training diverge, which is refused naming the file (tests/io/cli_reliability.sh);
// the run file takes (0, 10], a larger one being a typo there.
constexpr Bounds kLr{.min = 0};
constexpr Bounds kRunFileLr{.min = 0, .max = 10, .exclusive_min = true};
constexpr Bounds kCoef{.min = 0, .max = 100};
constexpr Bounds kClip{.min = 0, .max = 100, .exclusive_min = true};

}  // namespace

const cli::OptionSchema<Common>& common_schema() {
  static const cli::OptionSchema<Common> s = {
      field<Common>(&Common::lr, {.flag = "--lr", .type = number,
                                 .help = "Peak learning rate (AdamW; after warmup, see --lr-schedule)",
                                 .key = "lr", .bounds = kLr,
                                  .doc = "AdamW's peak learning rate, reached after `--warmup-steps` [0] of linear warmup "
                                         "(`lr·(step+1)/warmup`); ppo's critic has `--critic-lr` [5e-5]",
                                  .run_file_bounds = kRunFileLr}),
      field<Common>(&Common::warmup_steps,
                   {.flag = "--warmup-steps", .type = integer,
                    .help = "Linear warmup over this many optimizer steps (the optimizer's global step, as its state "
                            "records it)",
                    .key = "warmup_steps", .bounds = {.min = 0, .max = kMaxCount}}),
      field<Common>(&Common::lr_schedule, {.flag = "--lr-schedule", .type = choice,
                                          .help = "After warmup: constant, or a cosine or linear decay to --min-lr",
                                          .key = "lr_schedule", .choices = {"constant", "cosine", "linear"},
                                           .doc = "after warmup: the peak, or a cosine or linear decay from it to `--min-lr` [0] at the end of the "
                                                  "schedule, `--min-lr` after it (ppo's critic: `--min-lr · critic-lr / lr`)"}),
      field<Common>(&Common::min_lr, {.flag = "--min-lr", .type = number,
                                     .help = "Where the decay ends (a second model's, as PPO's critic, scaled by its "
                                             "peak / --lr)",
                                     .key = "min_lr", .bounds = {.min = 0, .max = 10}}),
      field<Common>(&Common::total_steps, {.flag = "--total-steps", .type = integer,
                                          .help = "The optimizer's global step at which the decay reaches --min-lr "
                                                  "(0: after --lr-calls calls of this one's steps)",
                                          .bounds = {.min = 0},
                                           .doc = "where the decay ends, as the optimizer's global step; 0: after `--lr-calls` [1] calls of this one's "
                                                  "optimizer steps, counted from the step the optimizer state (`<stem>.optim.h5`) is at. `braid run` "
                                                  "passes `--lr-calls` = the iterations left, so one schedule spans the whole run"}),
      field<Common>(&Common::lr_calls, {.flag = "--lr-calls", .type = integer,
                                       .help = "The decay spans this call and this many - 1 more of the same size, "
                                               "from the step the optimizer state is at (braid run passes the "
                                               "iterations left)",
                                       .bounds = {.min = 1}}),
      field<Common>(&Common::epochs, {.flag = "--epochs", .type = integer, .help = "Passes over the data",
                                     .key = "epochs", .bounds = {.min = 1, .max = 1000},
                                      .doc = "passes over the data"}),
      field<Common>(&Common::mini_batch, {.flag = "--mini-batch", .type = integer,
                                         .help = "Sequences per optimizer step (rm, dpo: pairs); 0 = all of them",
                                         .key = "mini_batch", .bounds = {.min = 0, .max = kMaxCount},
                                          .doc = "sequences per optimizer step (rm, dpo: pairs)"}),
      field<Common>(&Common::micro_tokens, {.flag = "--micro-tokens", .type = integer,
                                           .help = "Tokens per micro-batch (gradients accumulate over them)",
                                           .key = "micro_tokens", .bounds = {.min = 1, .max = kMaxCount},
                                            .doc = "tokens per micro-batch; gradients accumulate over the micro-batches of a step"}),
      field<Common>(&Common::recompute,
                   {.flag = "--recompute", .type = integer,
                    .help = "Activation recomputation: 0 keeps every layer's activations for the backward; k "
                            "recomputes the layers whose index is a multiple of k (1: every layer), the same results "
                            "with less memory and more time",
                    .key = "recompute", .bounds = {.min = 0, .max = kMaxCount},
                    .doc = "activation recomputation: 0 keeps every layer's activations for the backward; K recomputes the "
                           "layers whose index is a multiple of K (1: every layer) just before the backward goes through them, "
                           "keeping only their inputs. The same results bit for bit on the CPU, less memory (docs/memory.md), a "
                           "forward more of those layers. Every mode, `--schedule` too"}),
      field<Common>([](Common& o) -> int& { return o.lora.rank; },
                   {.flag = "--lora-rank", .type = integer,
                    .help = "LoRA: train adapters of this rank on the linear layers, the base frozen (0: train every "
                            "weight); the output is an adapter file naming its base. A model given as an adapter file "
                            "continues its adapters",
                    .key = "lora_rank", .bounds = {.min = 0, .max = 65536},
                    .doc = "LoRA: train adapters of rank R on the linear layers, the base frozen (below, \"LoRA\"); 0 trains "
                           "every weight"}),
      field<Common>([](Common& o) -> double& { return o.lora.alpha; },
                   {.flag = "--lora-alpha", .type = number,
                    .help = "LoRA: the adapters' scale is alpha / rank (alpha / sqrt(rank) with --rslora)",
                    .key = "lora_alpha", .bounds = {.min = 0, .max = 1e6, .exclusive_min = true}}),
      field<Common>([](Common& o) -> double& { return o.lora.dropout; },
                   {.flag = "--lora-dropout", .type = number,
                    .help = "LoRA: dropout on each adapter's input in training (PEFT's lora_dropout; the masks drawn "
                            "from --seed, the optimizer step and each token's sequence and position)",
                    .key = "lora_dropout", .bounds = {.min = 0, .max = 0.999},
                    .doc = "LoRA: dropout on each adapter's input while training (PEFT's `lora_dropout`; below, "
                           "\"LoRA\")"}),
      field<Common>([](Common& o) -> bool& { return o.lora.rslora; },
                   {.flag = "--rslora", .type = boolean,
                    .help = "LoRA: scale the adapters by alpha / sqrt(rank) (rsLoRA)", .show_default = false}),
      custom<Common>(
          [](CLI::App& app, Common& o, const OptionSpec& spec) {
            return app
                .add_option_function<std::string>(
                    spec.flag,
                    [&o](const std::string& list) {
                      try {
                        o.lora.targets = model::parse_lora_targets(list);
                      } catch (const std::invalid_argument& e) {
                        throw CLI::ValidationError("--lora-targets", e.what());
                      }
                    },
                    spec.help)
                ->default_str("all");
          },
          {.flag = "--lora-targets", .type = text,
           .help = "LoRA: the linear layers that get adapters, a comma-separated list of q, k, v, o, gate, up, down "
                   "(or all)",
           .doc = "the layers that get adapters: a comma-separated subset of `q,k,v,o,gate,up,down`"}),
      field<Common>(&Common::seed, {.flag = "--seed", .type = integer, .help = "Seed of the mini-batch shuffle",
                                    .doc = "the shuffle of epoch *e* is `Rng(seed, e)`"}),
      field<Common>(&Common::max_grad_norm, {.flag = "--max-grad-norm", .type = number,
                                            .help = "Clip gradients to this global norm (<= 0: no clipping)",
                                             .doc = "clip by global gradient norm (≤ 0: off)"}),
      field<Common>(&Common::weight_decay, {.flag = "--weight-decay", .type = number,
                                           .help = "AdamW's decoupled weight decay (matrices only)",
                                            .doc = "decoupled, matrices only"}),
      field<Common>(&Common::threads, {.flag = "--threads", .type = integer, .help = "CPU threads (0: all cores)",
                                       .bounds = {.min = 0, .max = kMaxCount}, .doc = "CPU backend threads"}),
      field<Common>(&Common::tp, {.flag = "--tp", .type = integer,
                                 .help = "Tensor-parallel degree under mpirun: ranks = devices x tp, each model split "
                                         "over the tp ranks of a device, the devices data parallel (with --schedule: "
                                         "the schedule's devices)",
                                 .bounds = {.min = 1},
                                  .doc = "tensor-parallel degree under `mpirun`: ranks = devices × N, each model split N ways over the tp "
                                         "ranks of a device, the devices data parallel (below, \"Tensor parallel under mpirun\"); with "
                                         "`--schedule` the schedule's devices × N"}),
      backend::device_entry<Common>(&Common::device, "where the model runs: `cpu`, or `cuda` / `cuda:N` (GPU N). Where braid was built without CUDA, no "
                                "GPU or driver is present, `--device cuda` exits 2 saying which; any other value exits 2 naming "
                                "`--device`; every mode, the fused pipeline (`--schedule`) too"),
      backend::dtype_entry<Common>(&Common::dtype, "storage of the weights the passes read; with bf16 (half the weight memory) AdamW keeps an f32 "
                                "master copy, updates it and rounds it into the bf16 copy each step; the checkpoint written is the "
                                "f32 master. Gradients and moments stay f32. Every mode, `--schedule` too"),
      field<Common>(&Common::stats, {.flag = "--stats", .type = path,
                                    .help = "Write timings and per-step losses (braid.stagestats JSON) to this file",
                                    .show_default = false,
                                     .doc = "timings and per-step losses (below)"}),
      field<Common>(&Common::force,
                   {.flag = "--force", .type = boolean,
                    .help = "Train even when an output is already there, made from other inputs or options (without "
                            "it such an output is refused, naming what differs; one made from the same is kept and "
                            "training skipped)",
                    .show_default = false,
                    .doc = "train even when an output is already there made from other inputs or options (without it such an "
                           "output is refused, naming what differs; below, \"Resumption\")"}),
      field<Common>(&Common::optimizer_state,
                   {.flag = "--optimizer-state", .type = text,
                    .help = "The trained model's AdamW state: auto (the state beside the input checkpoint when this "
                            "mode of braid-train made it; a new stage, as DPO or PPO after SFT, starts fresh), fresh, "
                            "or the path of a state file (or of the checkpoint it lies beside)",
                    .doc = "the trained model's AdamW state: beside the input when the same mode made it, none, or another "
                           "state (below, \"Optimizer state\"); ppo's critic: `--critic-optimizer-state`"}),
  };
  return s;
}

cli::OptionSchema<RlCommand> rl_schema(bool ppo) {
  cli::OptionSchema<RlCommand> s = {
      field<RlCommand>(&RlCommand::inputs,
                      {.flag = "shards", .type = path,
                       .help = "Scored sample shards, or - to read their paths from stdin (one a line)",
                       .required = true, .show_default = false}),
      field<RlCommand>(&RlCommand::actor, {.flag = "--actor", .type = path,
                                          .help = "Actor checkpoint (a weight file or the stem of stage files)",
                                          .required = true, .show_default = false}),
      field<RlCommand>(&RlCommand::actor_out, {.flag = "--actor-out", .type = path,
                                              .help = "New actor checkpoint to write", .required = true,
                                              .show_default = false}),
      custom<RlCommand>(
          [](CLI::App& app, RlCommand& o, const OptionSpec& spec) {
            return cli::decorate(app.add_option(spec.flag, o.clip,
                                                fmt::format("ε of the clipped policy ratio, both sides (default {} / {})",
                                                            o.preset_clip_low, o.preset_clip_high)),
                                 spec);
          },
          {.flag = "--clip", .type = number,
           .help = "ε of the clipped policy ratio, both sides (default: the algorithm's, low / high)", .key = "clip",
           .bounds = kClip, .show_default = false,
           .doc = "the ratio's clip range [1 − ε, 1 + ε] (default 0.2; DAPO 0.2 / 0.28, GSPO 3e-4 / 4e-4)"},
          [](RlCommand& o) { return fmt::format("{} / {}", o.preset_clip_low, o.preset_clip_high); }),
      field<RlCommand>(&RlCommand::clip_low, {.flag = "--clip-low", .type = number,
                                             .help = "ε below 1 (the ratio's floor 1 - ε; default --clip)",
                                             .key = "clip_low", .bounds = kClip, .show_default = false}),
      field<RlCommand>(&RlCommand::clip_high,
                      {.flag = "--clip-high", .type = number,
                       .help = "ε above 1 (DAPO's clip-higher; at least --clip-low; default --clip)",
                       .key = "clip_high", .bounds = kClip, .show_default = false}),
      field<RlCommand>(&RlCommand::loss_agg,
                      {.flag = "--loss-agg", .type = choice,
                       .help = "How token losses become the mini-batch's: token-mean, seq-mean-token-sum or "
                               "seq-mean-token-mean",
                       .key = "loss_agg", .choices = {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean"},
                       .doc = "`token-mean`, `seq-mean-token-sum` or `seq-mean-token-mean` (below, \"Aggregation\")"}),
      field<RlCommand>(&RlCommand::entropy_coef, {.flag = "--entropy-coef", .type = number,
                                                 .help = "Weight of the entropy bonus", .key = "entropy_coef",
                                                 .bounds = kCoef,
                                                  .doc = "the entropy bonus −c·H per token, under every algorithm"}),
      field<RlCommand>(&RlCommand::kl_coef, {.flag = "--kl-coef", .type = number,
                                            .help = "β of the KL term to the reference in the loss (needs "
                                                    "/logprobs/ref: score with --ref)",
                                            .key = "kl_coef", .bounds = kCoef}),
      field<RlCommand>(&RlCommand::kl_estimator,
                      {.flag = "--kl-estimator", .type = choice,
                       .help = "The loss's estimate of KL from d = logp - ref: k1 (d), k2 (d^2/2) or k3 (exp(-d) + d - 1)",
                       .key = "kl_estimator", .choices = {"k1", "k2", "k3"}}),
      field<RlCommand>(&RlCommand::sequence_ratio,
                      {.flag = "--sequence-ratio", .type = boolean,
                       .help = "GSPO's ratio: each token takes its sequence's (the geometric mean of the tokens' "
                               "ratios), clipped as a whole",
                       .key = "sequence_ratio", .negation = "--token-ratio",
                       .doc = "GSPO's ratio: every token takes its sequence's"}),
      field<RlCommand>(&RlCommand::tis_cap,
                      {.flag = "--tis-cap", .type = number,
                       .help = "Truncated importance sampling (0: off): recompute the actor's logprobs before training "
                               "and weigh each token by min(pi_old / pi_generator, CAP)",
                       .key = "tis_cap", .bounds = {.min = 0, .max = 1e6},
                       .doc = "truncated importance sampling against the generating engine (below)"}),
      field<RlCommand>(&RlCommand::schedule, {.flag = "--schedule", .type = path,
                                             .help = "schedule.json: run the fused actor+critic pipeline (under mpirun)",
                                             .show_default = false}),
      field<RlCommand>(&RlCommand::max_staleness,
                      {.flag = "--max-staleness", .type = integer,
                       .help = "Refuse samples with a token sampled more than N steps before the actor's (the shards' "
                               "/policy_step; -1: no bound). The stats file records the staleness either way"}),
      field<RlCommand>(&RlCommand::normalize_advantages,
                      {.flag = "--normalize-advantages", .type = boolean,
                       .help = "Whiten the advantages over all response tokens of the input (mean 0, std 1) before "
                               "training",
                       .key = "normalize_advantages", .negation = "--no-normalize-advantages",
                       .doc = "whiten the advantages over every response token of the input"}),
      field<RlCommand>(&RlCommand::filter_groups,
                      {.flag = "--filter-groups", .type = boolean,
                       .help = "Drop the groups (one prompt's samples) whose rewards are all equal (DAPO's dynamic "
                               "sampling)",
                       .negation = "--no-filter-groups",
                       .doc = "drop the groups (one prompt's samples: its stream position, the shard's `first_prompt` + sample_id "
                              "/ samples_per_prompt) whose rewards are all equal (DAPO's dynamic sampling, "
                              "train/group_filter.hpp); with every group dropped nothing is trained and the actor is written as it "
                              "was, one step on"}),
      field<RlCommand>(&RlCommand::max_groups, {.flag = "--max-groups", .type = integer,
                                               .help = "Train on at most this many groups, the first in the prompt "
                                                       "stream (0: all)",
                                               .bounds = {.min = 0},
                                                .doc = "train on at most N groups, the first in the prompt stream (braid run's refill passes its batch)"}),
  };
  auto common = cli::nested<RlCommand>(common_schema(), &RlCommand::common);
  s.insert(s.end(), common.begin(), common.end());
  if (!ppo) return s;
  s.insert(s.end(),
           {field<RlCommand>(&RlCommand::critic, {.flag = "--critic", .type = path,
                                                 .help = "Critic checkpoint (with a value head)", .required = true,
                                                 .show_default = false}),
            field<RlCommand>(&RlCommand::critic_out, {.flag = "--critic-out", .type = path,
                                                     .help = "New critic checkpoint to write", .required = true,
                                                     .show_default = false}),
            field<RlCommand>(&RlCommand::critic_lr, {.flag = "--critic-lr", .type = number,
                                                    .help = "The critic's learning rate", .key = "critic_lr",
                                                    .bounds = kLr, .run_file_bounds = kRunFileLr}),
            field<RlCommand>(&RlCommand::value_clip, {.flag = "--value-clip", .type = number,
                                                     .help = "ε of the clipped value loss (<= 0: unclipped)",
                                                     .key = "value_clip", .bounds = {.max = 100}}),
            field<RlCommand>(&RlCommand::critic_optimizer_state,
                            {.flag = "--critic-optimizer-state", .type = text,
                             .help = "The critic's AdamW state, as --optimizer-state is the actor's"})});
  return s;
}

namespace {

// The text modes' first options: the data, the model in and out (--actor or, rm, --reward).
cli::OptionSchema<TextCommand> text_head(const std::string& mode) {
  const bool rm = mode == "rm";
  cli::OptionSchema<TextCommand> s = {
      field<TextCommand>(&TextCommand::data, {.flag = "data", .type = path, .help = "JSON Lines file, - for stdin",
                                             .required = true, .show_default = false}),
      field<TextCommand>(&TextCommand::model,
                        {.flag = rm ? "--reward" : "--actor", .type = path,
                         .help = rm ? "Reward model checkpoint (with a value head)" : "Policy checkpoint (with an LM head)",
                         .required = true, .show_default = false}),
      field<TextCommand>(&TextCommand::model_out, {.flag = rm ? "--reward-out" : "--actor-out", .type = path,
                                                  .help = "New checkpoint to write", .required = true,
                                                  .show_default = false}),
  };
  return s;
}

// The text modes' options after their mode's own: the tokenizer, tools, template arguments
// and the common options.
cli::OptionSchema<TextCommand> text_tail() {
  cli::OptionSchema<TextCommand> s = {
      field<TextCommand>(&TextCommand::tokenizer, {.flag = "--tokenizer", .type = path,
                                                  .help = "byte, or a tokenizer.json (or a folder holding one)"}),
      field<TextCommand>(&TextCommand::tools, {.flag = "--tools", .type = path,
                                              .help = "A JSON file of tool schemas for the conversations without "
                                                      "\"tools\"",
                                              .show_default = false}),
      field<TextCommand>(&TextCommand::chat_template_kwargs,
                        {.flag = "--chat-template-kwargs", .type = text,
                         .help = "Chat template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": "
                                 "false}' (a line's own \"chat_template_kwargs\" win)",
                         .show_default = false}),
  };
  auto common = cli::nested<TextCommand>(common_schema(), &TextCommand::common);
  s.insert(s.end(), common.begin(), common.end());
  return s;
}

}  // namespace

cli::OptionSchema<TextCommand> text_schema(const std::string& mode) {
  auto s = text_head(mode);
  auto tail = text_tail();
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

cli::OptionSchema<DpoCommand> dpo_schema() {
  auto s = cli::nested<DpoCommand>(text_head("dpo"), &DpoCommand::text);
  s.insert(s.end(),
           {field<DpoCommand>(&DpoCommand::ref, {.flag = "--ref", .type = path,
                                                .help = "Reference policy checkpoint (default: --actor as read, before "
                                                        "training)",
                                                .show_default = false}),
            field<DpoCommand>(&DpoCommand::beta, {.flag = "--beta", .type = number,
                                                 .help = "β: the implicit reward's scale (> 0; IPO's τ)"}),
            field<DpoCommand>(&DpoCommand::loss, {.flag = "--dpo-loss", .type = choice,
                                                 .help = "sigmoid: -log σ(β·z) (DPO); ipo: (z - 1/(2β))²",
                                                 .choices = {"sigmoid", "ipo"}}),
            field<DpoCommand>(&DpoCommand::length_normalize,
                             {.flag = "--length-normalize", .type = boolean,
                              .help = "A completion's logprob as the mean over its tokens, not the sum",
                              .show_default = false})});
  auto tail = cli::nested<DpoCommand>(text_tail(), &DpoCommand::text);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

std::vector<cli::OptionSpec> train_run_file_specs(const std::string& algorithm) {
  const auto a = rl::algorithm_named(algorithm);
  std::vector<cli::OptionSpec> out;
  for (auto& spec : cli::specs_of(rl_schema(a && a->critic))) {
    if (!spec.key.empty()) out.push_back(std::move(spec));
  }
  return out;
}

void add_train_commands(CLI::App& app, TrainCommandLine& cl) {
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
  for (const auto& name : rl::algorithm_names()) {
    auto& [sub, o] = cl.rl_modes.emplace_back(app.add_subcommand(name, about.at(name)), rl_command(name));
    cli::add_schema_options(*sub, o, rl_schema(trains_critic(o)));
  }
  cl.sft_cmd = app.add_subcommand("sft", "Supervised fine-tuning on {\"prompt\",\"response\"} JSON lines (the "
                                         "response tokens are learnt)");
  cli::add_schema_options(*cl.sft_cmd, cl.sft, text_schema("sft"));
  cl.rm_cmd = app.add_subcommand("rm", "Reward-model training on {\"prompt\",\"chosen\",\"rejected\"} JSON lines "
                                       "(pairwise loss -log sigmoid(r_chosen - r_rejected))");
  cli::add_schema_options(*cl.rm_cmd, cl.rm, text_schema("rm"));
  cl.dpo_cmd = app.add_subcommand("dpo", "Direct preference optimisation of a policy on {\"prompt\",\"chosen\","
                                         "\"rejected\"} JSON lines, against the reference's logprobs computed once "
                                         "before training");
  cl.dpo.text.common.lr = 1e-6;
  cli::add_schema_options(*cl.dpo_cmd, cl.dpo, dpo_schema());
}

}  // namespace braid::train
