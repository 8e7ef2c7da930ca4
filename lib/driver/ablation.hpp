// The ablation in one run (the run file's "ablation"; docs/fusion.md): after iteration i,
// `braid run` runs that iteration again from the same inputs the other way — with a plan,
// with the fusions the run did not choose (every one it could take when it runs serial,
// none when it fuses); without one, serial when the run fuses — in a scratch folder
// OUT/iter-i/ablation/ that never replaces the iteration's own files: the rollout and the
// training as braid run would run them that way (the same step builders), each step timed.
//
// OUT/iter-i/ablation.json (braid.ablation, read by read_ablation in driver/report.hpp)
// holds both ways: each one's measured stage times (each tool's wall_seconds), step wall
// times (the rollout; the training: process start and loads included) and their sum, the
// total; each call's seconds as its tool's --stats reports them; and beside them the
// prediction of that way (driver/prediction.hpp; or, without a plan, the predicted totals
// of the braid-meshplan plan "ablation.plan" names). A complete ablation.json is kept: a
// rerun of the run does not measure again.
#pragma once

#include <filesystem>
#include <optional>
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

// The way the ablation runs the iteration again (above); nullopt when there is no other
// way (a serial run without a plan).
std::optional<RunSpec> other_way(const RunSpec& spec);

// The scratch layout of iteration i's ablation: OUT/iter-i/ablation/, whose
// iter-i folder receives the re-run's files.
Layout ablation_layout(const Layout& layout, int iteration);

// The re-run's steps, in order: its rollout, then its training (in ablation_layout).
std::vector<Step> ablation_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

// Whether OUT/iter-i/ablation.json is there and reads as a braid.ablation.
bool ablation_complete(const Layout& layout, int iteration);

// The figures of an ablation from the stats and step times of the iteration and of its
// re-run, and the predictions; InputError when a stats file lacks a stage's time.
ordered_json ablation_document(const RunSpec& spec, const Layout& layout, int iteration);

// Runs iteration i's re-run (afresh: its scratch iteration folder is removed first) and
// writes OUT/iter-i/ablation.json; throws StageFailed when a stage fails.
void run_ablation(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int iteration);

}  // namespace braid::driver
