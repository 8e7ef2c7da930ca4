// The ablation in one run (the run file's "ablation"; docs/fusion.md): after iteration i,
// `braid run` runs that iteration again from the same inputs with the fusions off, in a
// scratch folder OUT/iter-i/ablation/ that never replaces the iteration's own files:
//
//   serial generate   braid-generate on the same ranks, without migration or fusion
//   serial score      braid-score over those shards, after the generation
//   serial train      braid-train without the fused pipeline's schedule (only when the run
//                     has one: otherwise training is the same in both, and the iteration's
//                     own training time is the serial variant's too)
//
// and writes OUT/iter-i/ablation.json (braid.ablation, read by read_ablation in
// driver/report.hpp): the fused variant's stage times from the iteration's own stats
// files, the serial variant's from the stats files of the re-run, each a stage's
// wall_seconds, and, with "plan", braid-meshplan's predicted totals beside them.
// A complete ablation.json is kept: a rerun of the run does not measure again.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "driver/layout.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

// Whether the run measures the ablation of iteration i (from 1).
bool ablates(const RunSpec& spec, int iteration);

// The run file with the fusions off: no migration, no fused rollout, no schedule.
RunSpec serial_spec(const RunSpec& spec);

// The scratch layout of iteration i's ablation: OUT/iter-i/ablation/, whose
// iter-i folder receives the serial re-run's files.
Layout ablation_layout(const Layout& layout, int iteration);

// The serial re-run's steps, in order: generate, score, and with a schedule train (in ablation_layout).
std::vector<Step> ablation_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

// Whether OUT/iter-i/ablation.json is there and reads as a braid.ablation.
bool ablation_complete(const Layout& layout, int iteration);

// The figures of an ablation from the stats files of the iteration and of its re-run
// (and the plan's prediction, when the run file names one); InputError when a stats file
// lacks a stage's time.
ordered_json ablation_document(const RunSpec& spec, const Layout& layout, int iteration);

// Runs iteration i's serial re-run (afresh: its scratch iteration folder is removed first)
// and writes OUT/iter-i/ablation.json; throws StageFailed when a stage fails.
void run_ablation(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

}  // namespace braid::driver
