#include "eval/option_schema.hpp"

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"

namespace braid::eval {
namespace {

using cli::custom;
using cli::field;
using cli::kMaxCount;
using cli::OptionSpec;
using P = PolicyEvalOptions;
using E = EvalOptions;
using S = SynthCommand;
using namespace cli::option_types;

// --reward-cmd-timeout: unset (braid-score's default wait) until given.
cli::SchemaEntry<P> timeout_entry(OptionSpec spec) {
  auto e = custom<P>(
      [](CLI::App& app, P& o, const OptionSpec& s) {
        return cli::decorate(app.add_option_function<double>(s.flag, [&o](double v) { o.reward_cmd_timeout = v; }, s.help), s);
      },
      std::move(spec));
  e.get = [](P& o) { return o.reward_cmd_timeout ? json(*o.reward_cmd_timeout) : json(nullptr); };
  e.set = [](P& o, const json& v) { o.reward_cmd_timeout = v.get<double>(); };
  return e;
}

// A count of lines of one file (no cap here: a count past what memory holds is refused by
// write_synth, naming the memory it would take).
cli::SchemaEntry<S> count(std::int64_t SynthCounts::*member, const char* flag, const char* help) {
  return field<S>([member](S& o) -> std::int64_t& { return o.counts.*member; },
                  {.flag = flag, .type = integer, .help = help, .bounds = {.min = 0}});
}

}  // namespace

const cli::OptionSchema<PolicyEvalOptions>& policy_schema() {
  static const cli::OptionSchema<P> s = {
      field<P>([](P& o) -> std::string& { return o.model.checkpoint; },
               {.flag = "checkpoint", .type = path,
                .help = "The policy or reward model (a weight file or the stem of its stage files)", .required = true,
                .show_default = false}),
      field<P>(&P::prompts, {.flag = "--prompts", .type = path,
                             .help = "Held-out prompt file (braid-generate's JSON Lines; the policy is evaluated)",
                             .key = "prompts", .show_default = false,
                             .doc = "held-out prompts (braid-generate's JSON Lines with their extra fields): a policy is "
                                    "evaluated; in the run file, relative to its folder (default: `data.heldout`'s split)"}),
      field<P>(&P::reward_rule, {.flag = "--reward-rule", .type = text,
                                 .help = "What a sample scores: a rule of braid-score (math, digits, regex:RE, ...)",
                                 .key = "rule", .show_default = false,
                                 .doc = "what a sample scores: a rule of braid-score (`math`, `digits`, `regex:RE`, ...); in "
                                        "the run file, default the run's own reward when it is a rule or a command"}),
      field<P>(&P::reward_cmd, {.flag = "--reward-cmd", .type = text,
                                .help = "... or the user's scorer command (braid-score --reward-cmd)", .key = "command",
                                .show_default = false,
                                .doc = "... or the user's scorer command (braid-score `--reward-cmd`); in the run file, run "
                                       "in its folder"}),
      field<P>(&P::reward_cmd_dir, {.flag = "--reward-cmd-dir", .type = path,
                                    .help = "The scorer command's working folder", .show_default = false}),
      timeout_entry({.flag = "--reward-cmd-timeout", .type = number, .help = "Seconds to wait for each of its answers",
                     .key = "timeout", .bounds = {.min = 0, .exclusive_min = true}, .show_default = false,
                     .run_file_bounds = Bounds{.min = 0, .max = 86400, .exclusive_min = true}}),
      field<P>(&P::samples, {.flag = "-n,--samples", .type = integer, .help = "Samples per prompt (pass@n)",
                             .key = "samples", .bounds = {.min = 1, .max = kMaxCount},
                             .run_file_bounds = Bounds{.min = 1, .max = 4096}}),
      field<P>(&P::temperature, {.flag = "--temperature", .type = number, .help = "Sampling temperature; 0 is greedy",
                                 .key = "temperature", .bounds = {.min = 0},
                                 .run_file_bounds = Bounds{.min = 0, .max = 100}}),
      field<P>(&P::top_p, {.flag = "--top-p", .type = number, .help = "Nucleus sampling mass (1: off)",
                           .bounds = {.min = 0, .max = 1, .exclusive_min = true}}),
      field<P>(&P::top_k, {.flag = "--top-k", .type = integer, .help = "Top-k sampling (0: off)",
                           .bounds = {.min = 0, .max = kMaxCount}}),
      field<P>(&P::seed, {.flag = "--seed", .type = integer, .help = "Sampling seed",
                          .doc = "sampling seed: the same seed gives the same samples; in a run, the iteration's"}),
      field<P>(&P::max_new_tokens, {.flag = "--max-new-tokens", .type = integer, .help = "Response tokens at most",
                                    .key = "max_new_tokens", .bounds = {.min = 1, .max = kMaxCount},
                                    .doc = "response tokens at most; in the run file, default `generate.max_new_tokens` "
                                           "when set"}),
      field<P>(&P::max_batch, {.flag = "--max-batch", .type = integer, .help = "Sequences decoding together",
                               .bounds = {.min = 1, .max = kMaxCount}}),
      field<P>(&P::limit, {.flag = "--limit", .type = integer, .help = "Only the first N prompts (0: all)",
                           .bounds = {.min = 0, .max = kMaxCount}}),
      field<P>(&P::correct_at, {.flag = "--correct-at", .type = number,
                                .help = "A sample is right when its reward is at least this"}),
      field<P>(&P::k, {.flag = "-k,--k", .type = integers,
                       .help = "Also report pass@K and maj@K as keys (and pass@K on the summary line) for these K, "
                               "each at most --samples (every k <= n is in pass_at_k / maj_at_k anyway)",
                       .key = "k", .bounds = {.min = 1, .max = kMaxCount}, .show_default = false}),
      field<P>(&P::by, {.flag = "--by", .type = text,
                        .help = "Also break the figures down by this prompt field (e.g. digits)", .key = "by",
                        .show_default = false}),
      field<P>([](P& o) -> std::string& { return o.model.tokenizer; },
               {.flag = "--tokenizer", .type = path, .help = "byte, or a tokenizer.json / HF folder"}),
      field<P>([](P& o) -> std::string& { return o.model.tools; },
               {.flag = "--tools", .type = path,
                .help = "A JSON file of tool schemas for the conversations without \"tools\"", .show_default = false}),
      field<P>([](P& o) -> std::string& { return o.model.chat_template_kwargs; },
               {.flag = "--chat-template-kwargs", .type = text,
                .help = "Chat template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": false}' (a "
                        "line's own \"chat_template_kwargs\" win)",
                .show_default = false}),
      field<P>([](P& o) -> int& { return o.model.threads; },
               {.flag = "--threads", .type = integer, .help = "CPU threads (0: all cores)",
                .bounds = {.min = 0, .max = kMaxCount}}),
      field<P>([](P& o) -> std::int64_t& { return o.model.micro_tokens; },
               {.flag = "--micro-tokens", .type = integer, .help = "Tokens per forward micro-batch (--pairs)",
                .bounds = {.min = 1, .max = kMaxCount}}),
      backend::device_entry<P>([](P& o) -> std::string& { return o.model.device; }, "where the model runs: `cpu`, `cuda`, `cuda:N`"),
      backend::dtype_entry<P>([](P& o) -> backend::DType& { return o.model.dtype; }, "storage of the weights: f32 or bf16"),
  };
  return s;
}

const cli::OptionSchema<EvalOptions>& eval_schema() {
  static const cli::OptionSchema<E> s = [] {
    auto out = cli::nested<E>(policy_schema(), &E::policy);
    // The pairs' options after the prompt file's.
    const cli::OptionSchema<E> pairs = {
        field<E>(&E::pairs, {.flag = "--pairs", .type = path,
                             .help = "Held-out {\"prompt\",\"chosen\",\"rejected\"} lines (a reward model, or with --ref "
                                     "a DPO policy, is evaluated)",
                             .show_default = false}),
        field<E>(&E::ref, {.flag = "--ref", .type = path,
                           .help = "With --pairs: the checkpoint is a policy and this its DPO reference; a pair is right "
                                   "when the chosen completion's implicit reward beta*(log pi - log pi_ref) is the larger",
                           .show_default = false}),
        field<E>(&E::beta, {.flag = "--beta", .type = number, .help = "The implicit reward's beta (DPO)",
                            .bounds = {.min = 0, .exclusive_min = true}}),
        field<E>(&E::length_normalize, {.flag = "--length-normalize", .type = boolean,
                                        .help = "A completion's logprob as the mean over its tokens (as braid-train dpo "
                                                "--length-normalize)",
                                        .show_default = false}),
    };
    out.insert(out.begin() + 2, pairs.begin(), pairs.end());
    out.push_back(field<E>(&E::out, {.flag = "-o,--output", .type = path, .help = "Where the JSON goes (- is stdout)"}));
    return out;
  }();
  return s;
}

const cli::OptionSchema<SynthCommand>& synth_schema() {
  static const cli::OptionSchema<S> s = {
      field<S>(&S::out, {.flag = "-o,--output", .type = path, .help = "Output folder", .required = true,
                         .show_default = false}),
      cli::custom<S>([](CLI::App& app, S& o, const OptionSpec& spec) {
                       return cli::decorate(app.add_option(spec.flag, o.tasks, spec.help), spec)->delimiter(',');
                     },
                     {.flag = "--task", .type = text, .help = "sort, reverse, add or frac (several: the items cycle through them)"}),
      field<S>(&S::format, {.flag = "--format", .type = choice,
                            .help = "The files' shape: plain (prompt/answer), gsm8k (question, answer ending \"#### N\") "
                                    "or math (problem, solution with \\boxed{N})",
                            .choices = {"plain", "gsm8k", "math"}}),
      field<S>([](S& o) -> int& { return o.opt.min_digits; },
               {.flag = "--min-digits", .type = integer, .help = "Fewest digits", .bounds = {.min = 1, .max = kMaxCount}}),
      field<S>([](S& o) -> int& { return o.opt.max_digits; },
               {.flag = "--max-digits", .type = integer, .help = "Most digits (answers stay within the verifier's 18)",
                .bounds = {.min = 1, .max = kMaxCount}}),
      field<S>([](S& o) -> double& { return o.opt.tail; },
               {.flag = "--tail", .type = number, .help = "Pareto shape of the digit count: P(n >= k) = (min/k)^tail",
                .bounds = {.min = 0, .exclusive_min = true}}),
      field<S>([](S& o) -> std::uint64_t& { return o.opt.seed; },
               {.flag = "--seed", .type = integer, .help = "Seed (the same seed and options give the same files)"}),
      count(&SynthCounts::prompts, "--prompts", "RL prompts"),
      count(&SynthCounts::sft, "--sft", "SFT examples"),
      count(&SynthCounts::pairs, "--pairs", "Preference pairs"),
      count(&SynthCounts::heldout, "--heldout", "Held-out prompts (and pairs)"),
  };
  return s;
}

}  // namespace braid::eval
