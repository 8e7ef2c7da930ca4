// The whole iteration of a run, predicted as braid run runs it (docs/tools/meshplan.md, "The
// whole iteration"): every process it starts, each with its start-up (a process, or
// mpirun's MPI job), its loads and first-touched buffers, its passes (the cost model's,
// at the layout the tool runs: its ranks, tp, micro-batches), its shard and checkpoint
// files, and the waiting between them (braid-score scores a shard once braid-generate
// wrote it), on the machine's cores shared by every runnable thread
// (plan/run_model.hpp). The profile's "host" block (braid-profile measure) holds the
// fixed costs and rates; without it only the passes are predicted.
//
// One prediction per way of running the iteration — serial, inter-stage fusion (the
// fused rollout), intra-stage fusion (the fused actor+critic pipeline), both — of which
// braid run takes the fastest unless the run file fixes the fusions (driver/run_plan.hpp,
// apply_plan). The figures are what the run measures: each call's seconds as its tool's
// --stats reports them, each step's wall time (the rollout; the training), and the
// iteration (their sum).
#pragma once

#include <cstdint>

#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace braid::driver {

// a / b rounded up (a when b <= 0): shards, steps and micro-batches as the stages count them.
inline int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>(b <= 0 ? a : (a + b - 1) / b); }

struct RunSpec;

struct Fusions {
  bool inter = false;  // the fused rollout: generation's ranks score the finished shards
  bool intra = false;  // the fused actor+critic training pipeline
  bool operator==(const Fusions& o) const = default;
};
// "serial", "inter-stage", "intra-stage", "fused"
std::string fusions_name(Fusions f);
// The fusions a run is laid out with: inter-stage when its rollout is fused or migrates
// its long tail (at tp > 1 the migration alone, scored by braid-score after it), intra-stage
// when it trains with a fused schedule.
Fusions fusions_of(const RunSpec& spec);

struct PredictedStep {
  std::string name;     // "rollout", "train"
  double seconds = 0;   // the step's wall time
  double start = 0;     // process (or MPI job) start-up on its critical path
  double setup = 0;     // models loaded, buffers first touched
  double files = 0;     // shards and checkpoints read and written
};

struct Prediction {
  Fusions fusions;
  std::vector<std::pair<std::string, double>> calls;  // actor_gen, ref_inf, ...: seconds as --stats reports them
  std::vector<PredictedStep> steps;
  double iteration = 0;
  bool host = false;    // the profile's host costs were counted
  std::vector<std::string> notes;

  double call(const std::string& name) const;  // -1 when not predicted
  ordered_json to_json() const;
};

// The prediction of `spec` as it is laid out (its ranks, fuse, schedule or plan schedule,
// flags), from the plan's experiment, cluster and profile; nullopt when the run has no
// applied plan or the plan names no profile braid can read (then the reason in *why).
std::optional<Prediction> predict_iteration(const RunSpec& spec, std::string* why = nullptr);

// The least lead over serial, as a fraction of serial's predicted iteration, for which the
// driver takes a fusion: under it the ways are a tie (on a 2-core CPU the model's error
// between two ways of one run is a few percent, docs/tools/meshplan.md) and the run stays
// serial.
inline constexpr double kFusionLead = 0.05;

// The way predicted fastest (predictions not empty), or serial where that is among them and
// the fastest leads it by less than kFusionLead; *reason says which and why ("predicted 2.9 s
// an iteration inter-stage, 3.3 s serial").
Fusions choose_fusions(const std::vector<Prediction>& predictions, std::string* reason);

// OUT/prediction.json (braid.prediction, version 1): every way considered, the one
// chosen and why.
ordered_json prediction_document(const std::vector<Prediction>& variants, Fusions chosen, const std::string& reason);

}  // namespace braid::driver
