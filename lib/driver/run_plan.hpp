// The run file's "plan" (docs/formats-run.md, "Running a plan"): a braid-meshplan plan
// that lays out every call of an iteration, read, checked against the run (the same
// algorithm, models and batch), and turned into how each stage tool runs: its MPI ranks,
// --tp, and the flags that give its micro-batches; where a stage tool cannot run the
// planned layout as it is, the layout it runs instead and why (StageLayout::notes).
//
//   actor_gen                         braid-generate: ranks = (dp·pp) × tp, --tp, --max-batch,
//                                     R_t and m of the plan's inter-stage fusion
//   ref_inf, critic_inf, reward_inf   one braid-score (every rank holds all its models): the
//                                     union of their devices, the largest tp, --micro-tokens;
//                                     inside the fused rollout when the plan fuses generation
//                                     and inference
//   actor_train, critic_train         fused by the plan: braid-train --schedule (braid-schedgen
//                                     of the plan's schedspec); else one braid-train, data
//                                     parallel over the union of their devices, --micro-tokens,
//                                     --recompute where the plan recomputes
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"
#include "driver/prediction.hpp"

namespace braid::plan {
struct Experiment;
}

namespace braid::driver {

struct RunSpec;

// One call of the plan (its "calls" entry).
struct PlannedCall {
  std::string name;                // actor_gen, ref_inf, reward_inf, critic_inf, actor_train, critic_train
  int first_device = 0, devices = 1;
  std::string where;               // "node0[0-1]"
  int dp = 1, tp = 1, pp = 1, micro_batches = 1;
  int recompute = 0;               // a training call's activation recomputation (--recompute)
  double time_s = 0;               // predicted, the call alone

  // "d2t1p1 x4 on node0[0-1]"
  std::string layout() const;
};

// How one stage tool runs some of the plan's calls.
struct StageLayout {
  std::vector<std::string> calls;  // the plan's calls it runs
  int ranks = 1;                   // MPI ranks (mpirun -np when > 1)
  int tp = 1;                      // --tp when > 1
  std::int64_t micro_tokens = 0;   // --micro-tokens (score, train; 0: the tool's default)
  std::int64_t max_batch = 0;      // --max-batch (generate; 0: the tool's default)
  std::vector<std::string> notes;  // where it differs from the plan, and why
};

// "plan": {"experiment", "cluster", "profile" | "hardware", "options"}: braid run makes the
// plan itself with braid-meshplan into OUT/plan.json.
struct PlanRequest {
  std::filesystem::path experiment, cluster;
  std::optional<std::filesystem::path> profile;
  std::string hardware;                      // h100, h200 or a hardware file, without a profile
  std::vector<std::string> options;          // more braid-meshplan flags
};

struct RunPlan {
  std::filesystem::path file;                       // the braid.plan (for a request: OUT/plan.json once made)
  std::optional<std::filesystem::path> experiment;  // the braid.experiment it was made for
  std::optional<PlanRequest> request;               // braid run makes it
  std::vector<std::string> schedgen_options;        // for the fused training schedule
  bool applied = false;                             // read, checked and applied to the run

  std::vector<PlannedCall> calls;
  double iteration_s = 0, serial_s = 0;
  bool inter_used = false;
  double r_t_fraction = 0;
  int m = 0;
  bool intra_used = false;
  int groups = 1;
  json schedspec;                                   // fusion.intra_stage.schedspec
  StageLayout generate, score, train;
  std::vector<std::string> conflicts;               // run-file keys that won over the plan

  // What the whole iteration is predicted from (driver/prediction.hpp): the plan's cluster
  // and profile (a file, or analytic hardware).
  std::optional<std::filesystem::path> cluster, profile;
  std::string hardware;
  std::shared_ptr<const plan::Experiment> experiment_doc;
  // The fusions the run takes, why, and the prediction of every way it could take (empty
  // when nothing could be predicted: then the plan's own fusions).
  Fusions chosen;
  std::string choice_reason;
  std::vector<Prediction> predictions;
  // The run before the plan laid it out (variant_spec lays it out another way), and the
  // fused training's schedule once braid-schedgen made it.
  std::shared_ptr<const RunSpec> base;
  std::optional<std::filesystem::path> schedule_file;

  const PlannedCall* call(std::string_view name) const;
  // The summary shown by --dry-run, braid makefile and the log: the plan, each call's
  // layout beside what runs it, conflicts.
  std::vector<std::string> summary() const;
};

// The files braid run keeps for a plan under OUT: the plan it made, the schedspec of one
// group of the fused training and braid-schedgen's schedule of it (braid-train runs a copy
// of it per group, data parallel: sched::tile_schedule).
std::filesystem::path made_plan_file(const std::filesystem::path& out);
std::filesystem::path plan_schedspec_file(const std::filesystem::path& out);
std::filesystem::path plan_schedule_file(const std::filesystem::path& out);
// OUT/prediction.json: the whole-iteration prediction of every way considered
// (braid.prediction, driver/prediction.hpp), made again once the fused schedule is there.
std::filesystem::path prediction_file(const std::filesystem::path& out);
ordered_json record_prediction(const RunSpec& spec);

// Reads the plan file, checks it against the run (its experiment's algorithm, batch,
// epochs and model shapes; every mismatch named by the experiment's field), chooses the
// fusions (those the run file fixes; else the fastest way by the whole-iteration
// prediction, driver/prediction.hpp; else the plan's), and sets the run's ranks, tp,
// micro-batch flags and fusions from it where the run file leaves them out (a key the run
// file sets wins, recorded in conflicts). Problems go to `c` under "plan".
void apply_plan(Checker& c, RunSpec& spec);

// The run laid out on its plan with the fusions `f` instead of the chosen ones (the
// ablation's other way); the fused training takes plan.schedule_file.
RunSpec variant_spec(const RunSpec& spec, Fusions f);

}  // namespace braid::driver
