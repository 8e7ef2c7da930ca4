// The run file ("braid.run", version 1; docs/formats-run.md): one RL experiment
// as `braid run` and `braid makefile` read it. Parsing lists every problem of the
// file at once (core/json.hpp's Checker); paths in it are taken relative to the
// run file's own folder, so a run file and its prompts travel together.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/option_schema.hpp"
#include "data/split.hpp"
#include "driver/run_plan.hpp"
#include "eval/eval.hpp"
#include "rl/algorithms.hpp"

namespace braid::driver {

inline constexpr const char* kRunFormat = "braid.run";
inline constexpr int kRunVersion = 1;

// Where a model of the run comes from.
struct ModelSource {
  enum class Kind {
    absent,         // not given (a critic under GRPO)
    checkpoint,     // a checkpoint spec (a file, or the stem of stage files)
    init,           // random weights from `braid init`
    rule,           // a built-in reward rule (reward only)
    command,        // an external scorer command (reward only)
    initial_actor,  // the actor the run starts from (the default reference model)
  };
  Kind kind = Kind::absent;
  std::filesystem::path path;   // checkpoint spec, or init's config.json
  std::uint64_t seed = 0;       // init
  std::string rule;             // rule: "digits", "chars:SET", "length:N", "regex:RE", "math"
  std::string command;          // command: a shell command line, run in `command_dir`
  std::filesystem::path command_dir;  // command: the run file's folder
  std::optional<double> command_timeout;  // command: seconds to wait for each answer
};

// A stage tool's option as the run file sets it: "--max-new-tokens", "24"; a switch
// ("--normalize-advantages", "--no-norm-by-std") has the value "". Only what the run file
// names is passed on; everything else keeps the tool's default.
using ToolFlags = std::vector<std::pair<std::string, std::string>>;

// Held-out evaluation during the run (the run file's "eval"; docs/formats-run.md):
// `braid eval` of the actor on a prompt file after iteration 0 (the start), every
// `every` iterations and after the last, each into OUT/iter-i/eval.json. The section's
// keys are braid eval's (lib/eval/option_schema.cpp) and `every` (eval_section_schema).
struct EvalSpec {
  // braid eval's options the section sets: prompts, samples, temperature, max_new_tokens
  // (default generate.max_new_tokens when set), rule or command (+ timeout; default the
  // run's own reward), by, k; a command runs in the run file's folder.
  eval::PolicyEvalOptions policy;
  int every = 1;
  bool heldout_split = false;        // prompts: the data section's held-out split (made into OUT/data/)
};
// The run file's "eval" keys: braid eval's keyed options, and `every` (a key alone).
const cli::OptionSchema<EvalSpec>& eval_section_schema();

// The ablation in one run (the run file's "ablation"; driver/ablation.hpp): the iterations
// run again with the fusions off, every `every` iterations and/or those listed, and the
// braid-meshplan plan whose predicted fused and serial totals go beside the measurement.
struct AblationSpec {
  int every = 0;                     // 0: only `iterations`
  std::vector<int> iterations;
  std::optional<std::filesystem::path> plan;
};

// The prompt dataset (the run file's "data"; docs/formats-run.md, lib/data): the field map
// and held-out split braid data applies first (into OUT/data/), and the stream each
// iteration takes its prompts from: batch_prompts of them from position (i − 1) · batch,
// epochs of a seeded shuffle. Without a "data" section every iteration takes every prompt.
struct DataSpec {
  std::int64_t batch_prompts = 0;   // prompts an iteration takes (0: every prompt read)
  bool shuffle = true;              // each epoch in its own seeded order
  std::uint64_t seed = 0;           // the shuffle's and the split's (default: the run's seed)
  std::vector<std::string> fields;  // "prompt=question", ... (data/fields.hpp)
  data::HeldOut heldout;
  // DAPO's dynamic sampling (driver/dynamic_sampling.hpp): up to this many rollouts of
  // batch_prompts an iteration while too few groups have unequal rewards (0: off).
  int dynamic_rounds = 0;
  // Whether braid data prepares the file first (a field map or a held-out split).
  bool prepared() const { return !fields.empty() || heldout.any(); }
};

// Which iterations' checkpoints the run keeps (the run file's "checkpoints";
// driver/retention.hpp): every save_every-th and the last, at most keep_last of them.
struct CheckpointSpec {
  int save_every = 0;   // 0: only the last iteration is saved
  int keep_last = 0;    // 0: every saved one
};

struct RunSpec {
  std::filesystem::path file;       // the run file itself
  std::string algorithm = "ppo";    // a name of rl/algorithms.hpp
  ModelSource actor, critic, ref, reward;
  std::filesystem::path prompts;
  std::string tokenizer = "byte";   // "byte" or a (resolved) path
  // Conversations' tools and template keyword arguments for every prompt line without its
  // own ("tools": a JSON file of tool schemas; "chat_template_kwargs": an object, as JSON
  // text): braid-generate's and braid eval's --tools and --chat-template-kwargs.
  std::optional<std::filesystem::path> tools;
  std::optional<std::string> chat_template_kwargs;
  int iterations = 1;
  std::uint64_t seed = 0;           // generation and training seeds derive from it per iteration
  std::optional<int> threads;
  std::optional<std::string> device;  // --device of every stage tool ("cpu", "cuda:N")
  std::optional<std::string> dtype;  // --dtype for every stage tool ("f32" | "bf16")
  ToolFlags generate, score, train;
  // Adaptive KL control (score.kl_target; PPO): braid run sets braid-score's --kl-coef of
  // each iteration from the previous one's (driver/kl_control.hpp), starting at
  // kl_coef_start (score.kl_coef, else braid-score's default); spec.score then holds no
  // --kl-coef of its own.
  std::optional<double> kl_target;
  double kl_horizon = 10000;
  double kl_coef_start = 0;
  // The rollout (generate.ranks, .migrate_threshold, .migrate_to, .fuse): braid-generate under
  // `mpirun -np rollout_ranks` when more than one, long-tail migration, and the fused
  // rollout (braid-generate ... -- SCORE-OPTIONS, lib/fuse) instead of a pipe into braid-score.
  int rollout_ranks = 1;
  std::optional<std::string> migrate_threshold;   // braid-generate's --migrate-threshold text
  std::optional<int> migrate_to;
  bool fuse = false;                              // default: rollout_ranks > 1
  // Words given to every mpirun the run starts, before -np (mpirun.options, then
  // --hostfile FILE for mpirun.hostfile).
  std::vector<std::string> mpirun_options;
  // A braid-meshplan plan (the run file's "plan"; driver/run_plan.hpp): every call's ranks,
  // tp and micro-batches, where the run file leaves them out.
  std::optional<RunPlan> run_plan;
  int rollout_tp = 1;                             // braid-generate's --tp
  int score_ranks = 1;                            // braid-score under mpirun -np when > 1 (not fused)
  int score_tp = 1;
  std::optional<std::filesystem::path> schedule;  // braid-train's fused pipeline under mpirun
  int ranks = 1;                                  // MPI ranks of training (the fused pipeline, or data parallel)
  int train_tp = 1;                               // braid-train's --tp
  bool plan_schedule = false;                     // the fused schedule is made from the plan (braid run)
  std::optional<bool> train_fuse;                 // train.fuse: the plan's fused training fixed on or off
  // Pipeline stages the fused pipeline trains (and writes as stage files) each model in.
  int actor_stages = 1;
  int critic_stages = 1;
  // OPPO's overcommit and defer (generate.overcommit: extra groups per iteration; absent:
  // off); docs/overlap.md.
  std::optional<int> overcommit;
  // One-step asynchronous mode ("async": true): iteration i+1 generates with the actor of
  // iteration i-1 while iteration i trains.
  bool async = false;
  std::optional<EvalSpec> eval;
  std::optional<DataSpec> data;
  std::optional<CheckpointSpec> checkpoints;  // absent: every iteration's checkpoints stay
  std::optional<AblationSpec> ablation;   // absent: off

  // The keys the run file sets ("generate.ranks", "train.micro_tokens", ...): they win over a plan.
  std::vector<std::string> set_keys;

  bool uses_critic() const {
    const auto a = rl::algorithm_named(algorithm);
    return a && a->critic;
  }
  bool sets(std::string_view key) const;
};

// Reads and checks a run file; InputError listing every problem (each with its field,
// unknown keys with a did-you-mean) when it is not right.
RunSpec load_run_file(const std::filesystem::path& path);

// Trains with the fused schedule braid run made from the plan (braid-schedgen): --schedule
// FILE, and each model's stage count from it; InputError naming the run file when it is not right.
void use_plan_schedule(RunSpec& spec, const std::filesystem::path& schedule);

}  // namespace braid::driver
