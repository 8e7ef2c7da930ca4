#include "score/options.hpp"

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "rl/algorithms.hpp"

namespace braid::score {
namespace {

using cli::custom;
using cli::field;
using cli::kMaxCount;
using cli::OptionSpec;
using O = CommandOptions;
using namespace cli::option_types;

}  // namespace

const cli::OptionSchema<CommandOptions>& score_schema() {
  static const cli::OptionSchema<O> s = {
      field<O>(&O::out_dir, {.flag = "-o,--output", .type = path, .help = "Folder for the scored shards (made if missing)",
                             .required = true, .show_default = false}),
      field<O>(&O::ref, {.flag = "--ref", .type = path,
                         .help = "Reference model checkpoint (LM head): adds /logprobs/ref and the KL penalty",
                         .show_default = false,
                         .doc = "reference model (needs an LM head): adds `/logprobs/ref`"}),
      field<O>(&O::critic, {.flag = "--critic", .type = path, .help = "Critic checkpoint (value head): adds /values (PPO)",
                            .show_default = false,
                            .doc = "critic (needs a value head, `score.weight`): adds `/values`; required by PPO, refused (exit 2) by "
                                   "the algorithms without a critic"}),
      field<O>(&O::reward, {.flag = "--reward", .type = path, .help = "Reward model checkpoint (value head at the last token)",
                            .show_default = false,
                            .doc = "reward model (needs a value head)"}),
      field<O>(&O::reward_rule, {.flag = "--reward-rule", .type = text,
                                 .help = "A built-in reward instead of a model: digits, chars:SET, length:N, regex:RE, "
                                         "or math (the response's final answer against the prompt line's \"answer\")",
                                 .show_default = false,
                                 .doc = "a built-in reward instead of a model (below), `math` among them; exactly one of `--reward`, "
                                        "`--reward-rule`, `--reward-cmd`"}),
      field<O>(&O::reward_cmd, {.flag = "--reward-cmd", .type = text,
                                .help = "An external scorer instead of a model: a shell command started once, fed one "
                                        "JSON line per sample (prompt, response, sample_id, the prompt line's extra "
                                        "fields), answering one number per line",
                                .show_default = false,
                                .doc = "an external scorer (below): a shell command line, started once for the run"}),
      field<O>(&O::reward_cmd_dir, {.flag = "--reward-cmd-dir", .type = path,
                                    .help = "Working directory of the --reward-cmd scorer (default: ours)",
                                    .show_default = false,
                                    .doc = "the scorer's working directory"}),
      field<O>(&O::reward_cmd_timeout, {.flag = "--reward-cmd-timeout", .type = number,
                                        .help = "Seconds to wait for the scorer's next answer",
                                        .bounds = {.min = 0, .exclusive_min = true},
                                        .doc = "seconds to wait for the scorer's next answer before giving up (exit 2)"}),
      field<O>(&O::tokenizer, {.flag = "--tokenizer", .type = path,
                               .help = "Tokenizer that decodes prompts and responses for --reward-rule and "
                                       "--reward-cmd (byte or a tokenizer.json)",
                               .doc = "decodes prompts and responses for `--reward-rule` and `--reward-cmd`"}),
      field<O>(&O::algorithm, {.flag = "--algorithm", .type = choice,
                               .help = "How rewards become advantages: ppo (critic + GAE), grpo, dr-grpo, dapo, gspo "
                                       "(group advantages), rloo (leave-one-out baseline), reinforce++ "
                                       "(returns-to-go), reinforce++-baseline (group mean)",
                               .choices = rl::algorithm_names(),
                               .doc = "how rewards become advantages: `ppo` (GAE), `grpo`, `dr-grpo`, `dapo`, `gspo` (group advantages), "
                                      "`rloo` (leave-one-out), `reinforce++` (returns-to-go), `reinforce++-baseline` (group mean); below, "
                                      "and docs/tools/train.md \"The policy algorithms\""}),
      field<O>(&O::kl_coef, {.flag = "--kl-coef", .type = number,
                             .help = "KL penalty in the rewards against --ref: per token (ppo, reinforce++), or summed "
                                     "over the response and taken off its reward (group advantages). Default with "
                                     "--ref: ppo 0.05, rloo and reinforce++ 0.01, the others 0; without --ref 0",
                             .key = "kl_coef", .bounds = {.min = 0}, .show_default = false,
                             .doc = "the KL penalty in the rewards: per token (ppo, reinforce++), or summed over the response and taken "
                                    "off its reward (the group estimators); `> 0` without `--ref` is refused. A KL term in the loss "
                                    "instead is braid-train's `--kl-coef`",
                             .run_file_bounds = Bounds{.min = 0, .max = 100}}),
      field<O>(&O::kl_estimator, {.flag = "--kl-estimator", .type = choice,
                                  .help = "The penalty's estimate of KL from d = logp - ref_logp: k1 (d), k2 (d^2/2) "
                                          "or k3 (exp(-d) + d - 1)",
                                  .key = "kl_estimator", .choices = {"k1", "k2", "k3"},
                                  .doc = "the penalty's estimate of KL from d = a_t − r_t: d, ½d², exp(−d) + d − 1; refused "
                                         "where the KL coefficient is 0 (nothing to estimate)"}),
      custom<O>(
          [](CLI::App& app, O& o, const OptionSpec& spec) {
            app.add_flag_callback(spec.flag, [&o] { o.std_normalize = true; }, spec.help);
            return app.add_flag_callback(spec.negation, [&o] { o.std_normalize = false; },
                                         "Group-mean advantages: do not (the default of dr-grpo, reinforce++-baseline)");
          },
          {.flag = "--norm-by-std", .type = boolean,
           .help = "Group-mean advantages: divide by the group's std (the default of grpo, dapo, gspo)",
           .key = "norm_by_std", .negation = "--no-norm-by-std", .show_default = false,
           .doc = "group-mean advantages divided by the group's std or not (Dr. GRPO's switch; not for ppo, rloo, "
                  "reinforce++)"}),
      field<O>(&O::overlong_buffer,
               {.flag = "--overlong-buffer", .type = integer,
                .help = "DAPO's overlong reward shaping: a response within this many tokens of the generation's "
                        "max_new_tokens loses reward linearly, --overlong-penalty at the cap (0: off; default dapo 20% "
                        "of max_new_tokens, the others off)",
                .key = "overlong_buffer", .bounds = {.min = 0, .max = kMaxCount}, .show_default = false,
                .doc = "DAPO's overlong reward shaping (below); 0: off"}),
      field<O>(&O::overlong_penalty, {.flag = "--overlong-penalty", .type = number,
                                      .help = "The reward lost at max_new_tokens", .key = "overlong_penalty",
                                      .bounds = {.min = 0, .max = 100, .exclusive_min = true},
                                      .doc = "the reward lost at `max_new_tokens`"}),
      field<O>(&O::gamma, {.flag = "--gamma", .type = number, .help = "GAE discount", .key = "gamma",
                           .bounds = {.min = 0, .max = 1}}),
      field<O>(&O::lambda, {.flag = "--lambda", .type = number, .help = "GAE lambda", .key = "lambda",
                            .bounds = {.min = 0, .max = 1}}),
      field<O>(&O::std_eps, {.flag = "--std-eps", .type = number,
                             .help = "Group advantages: (reward - group mean) / (group std + this)",
                             .bounds = {.min = 0, .exclusive_min = true},
                             .doc = "the ε of `(R − mean) / (std + ε)`"}),
      field<O>(&O::samples_per_prompt,
               {.flag = "--samples-per-prompt", .type = integer,
                .help = "Group size of group advantages (default: samples_per_prompt of the shards' generate config)",
                .bounds = {.min = 1}, .show_default = false,
                .doc = "group size; by default `samples_per_prompt` of the shards' generate config"}),
      field<O>(&O::micro_tokens, {.flag = "--micro-tokens", .type = integer, .help = "Tokens in one forward pass of a model",
                                  .bounds = {.min = 1},
                                  .doc = "tokens in one forward pass of a model (a longer sequence runs alone)"}),
      field<O>(&O::prefix, {.flag = "--prefix", .type = text, .help = "Output names: PREFIX-<index of the input>.h5",
                            .doc = "output names `P-<index>.h5`"}),
      field<O>(&O::threads, {.flag = "--threads", .type = integer,
                             .help = "CPU backend threads (0: all cores of this process)",
                             .bounds = {.min = 0, .max = kMaxCount},
                             .doc = "CPU backend threads"}),
      field<O>(&O::tp, {.flag = "--tp", .type = integer,
                        .help = "Under mpirun: tensor-parallel ranks per device (the models split N ways); the ranks "
                                "form -np / N devices, which take the shards as ranks do at --tp 1",
                        .bounds = {.min = 1},
                        .doc = "under mpirun: tensor-parallel ranks per device, every model split N ways (below); `-np` must be a "
                               "multiple of N"}),
      backend::device_entry<O>(&O::device, "where the model runs: `cpu`, or `cuda` / `cuda:N` (GPU N). Where braid was built without CUDA, no "
                        "GPU or driver is present, `--device cuda` exits 2 saying which; any other value exits 2 naming "
                        "`--device`"),
      backend::dtype_entry<O>(&O::dtype, "storage of the ref, critic and reward models' weights: bf16 halves weight memory (f32 values "
                        "rounded to nearest even; no f32 copy kept); activations and outputs stay f32"),
      field<O>(&O::stats, {.flag = "--stats", .type = path,
                           .help = "Write timings (braid.stagestats JSON: ref_inf, critic_inf, reward_inf) here",
                           .show_default = false,
                           .doc = "timings as `braid.stagestats` JSON (below)"}),
  };
  return s;
}

void add_score_options(CLI::App& app, CommandOptions& o) { cli::add_schema_options(app, o, score_schema()); }

}  // namespace braid::score
