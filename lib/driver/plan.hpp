// The commands of a run, as data: which processes each step starts, the files it
// reads and the files that show it done. `braid run` executes these steps and
// `braid makefile` writes them as Makefile rules, so the two cannot drift apart.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "driver/layout.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

// The executables a run starts (paths, or bare names looked up on PATH).
struct Tools {
  std::string braid = "braid";
  std::string generate = "braid-generate";
  std::string score = "braid-score";
  std::string train = "braid-train";
  std::string mpirun = "mpirun";
  std::string meshplan = "braid-meshplan";   // makes the plan a run file asks for
  std::string schedgen = "braid-schedgen";   // the fused training schedule of a plan
};

// The stage tools beside the running braid executable when they are there, else their names (PATH).
Tools find_tools();

// One process of a step. `shards_from`, when set, stands for the sample shards
// "<dir>/<pattern>" inserted at argv[shards_at]: they exist only once the previous
// step ran, so `braid run` lists the folder and a Makefile writes a shell glob.
struct Command {
  std::string stage;               // "generate", "score", "train", "init"
  std::vector<std::string> argv;
  std::optional<std::filesystem::path> shards_from;
  std::string shards_pattern;      // "scored-*.h5"
  std::size_t shards_at = 0;
};

// A step: one process, or several with each one's stdout piped into the next
// (generate | score); the last one's stdout is discarded (it lists files the
// driver finds by itself). The step is due when an output is missing or older
// than an input; `stale` is removed first when existing outputs are out of date,
// so that tools which skip complete files do not keep results of an older model.
struct Step {
  std::string name;                // "iteration 2 rollout", for messages
  std::vector<Command> pipeline;
  // A second pipeline, started when the first has ended (braid-score under mpirun over the
  // shards a planned generation wrote: under mpirun it cannot read them from a pipe).
  std::vector<Command> then;
  std::vector<std::filesystem::path> inputs;
  std::vector<std::filesystem::path> outputs;
  std::vector<std::filesystem::path> stale;
  // Partial outputs of an interrupted run are not reused: `stale` is removed before every
  // run (generate --overcommit makes its batch again whole from the same deferred file).
  bool restart = false;
  // What a plan laid out for the step's processes (each planned call's layout, and where the
  // step differs from it), shown as comments by --dry-run and in a Makefile.
  std::vector<std::string> notes = {};
};

// Extra arguments every stage tool gets (-q, -v) when braid run passes its own on.
struct PlanOptions {
  Tools tools;
  std::vector<std::string> verbosity;
  // braid run --force: a step made with other options than the run file now gives is made
  // again (with every step after it) instead of refused (driver/step_identity.hpp).
  bool force = false;
};

// The checkpoint a model has after `iteration` (0: the start).
std::filesystem::path actor_after(const RunSpec& spec, const Layout& layout, int iteration);
std::filesystem::path critic_after(const RunSpec& spec, const Layout& layout, int iteration);
// The fixed models: a checkpoint, or (when empty) none.
std::optional<std::filesystem::path> ref_checkpoint(const RunSpec& spec, const Layout& layout);
std::optional<std::filesystem::path> reward_checkpoint(const RunSpec& spec, const Layout& layout);

// `braid init` of each model the run file gives an "init" block, and braid data of a run
// file's field map or held-out split (iteration 0).
std::vector<Step> init_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt);
// The prompt file the rollouts read: braid data's OUT/data/train.jsonl, or the run file's own.
std::filesystem::path rollout_prompts(const RunSpec& spec, const Layout& layout);
// The stream position iteration i's batch (its dynamic-sampling round `round`) starts at:
// (i − 1) · batch, or under dynamic sampling where iteration i − 1 stopped (nullopt while
// that is not known: it has not rolled out).
std::optional<std::int64_t> first_prompt(const RunSpec& spec, const Layout& layout, int iteration, int round = 0);
// The actor (and critic) iteration i generates and scores with: that of iteration i-1, or
// under "async" of i-2 (the one-step asynchronous mode: i's rollout runs while i-1 trains).
int rollout_policy(const RunSpec& spec, int iteration);

// Iteration i (from 1): generate | score, then train. Under dynamic sampling round r > 0 is
// another rollout of the iteration, over the next batch of prompts (driver/dynamic_sampling.hpp).
Step rollout_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration, int round = 0);
Step train_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

// The steps in the order `braid run` runs them, the steps of a group at once: sync,
// {rollout i}, {train i} for each i; async, {rollout 1}, {train 1, rollout 2}, ...,
// {train n}; an evaluation (evaluates()) is a group of its own after its training.
std::vector<std::vector<Step>> step_groups(const RunSpec& spec, const Layout& layout, const PlanOptions& opt);

// Whether the run evaluates the actor of `iteration` (0: the start): with an "eval"
// section, at 0, every `every` iterations and at the last.
bool evaluates(const RunSpec& spec, int iteration);
// `braid eval` of the actor after `iteration` into OUT/iter-i/eval.json (only where evaluates()).
Step eval_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

// The checkpoints an iteration's training writes (the step's outputs).
std::vector<std::filesystem::path> trained_checkpoints(const RunSpec& spec, const Layout& layout, int iteration);

}  // namespace braid::driver
