// The run's report, rewritten at the end of every iteration `braid run` finishes:
//
//   OUT/report.json   braid.report: one row per iteration (reward, KL, held-out accuracy,
//                     response length, entropy, each stage's seconds), the fused training
//                     schedule when the run has one, and the ablations measured so far
//   OUT/report.svg    the same as a picture (hand-written SVG, deterministic): a chart per
//                     series, the stage times as stacked bars, the schedule's timeline
//                     (braid-schedgen's drawing, lib/sched/svg), the ablation as bars
//
// An ablation (OUT/iter-i/ablation.json, braid.ablation version 1; docs/formats-run.md)
// is one iteration's stage times measured with each fusion on and off, beside
// braid-meshplan's prediction for the same settings:
//
//   {"format": "braid.ablation", "version": 1, "iteration": 3,
//    "settings": {...what was fixed: ranks, migrate_to, ...},
//    "prediction": {"tool": "braid-meshplan", "plan": "plan.json"},     (optional)
//    "variants": [{"name": "serial", "fusions": [],
//                  "measured": {"generate": 4.1, "score": 2.0, "train": 6.3, "total": 12.4},
//                  "predicted": {"total": 11.8}},                           (optional)
//                 {"name": "fused", "fusions": ["inter_stage", "intra_stage"], ...}]}
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/json.hpp"
#include "driver/layout.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

inline constexpr const char* kReportFormat = "braid.report";
inline constexpr const char* kAblationFormat = "braid.ablation";
inline constexpr int kReportVersion = 1;

// The stages whose seconds the report shows, in drawing order.
inline constexpr const char* kReportStages[] = {"generate", "score", "train", "eval"};

// An ablation file, checked (InputError listing every problem: a missing variant name,
// a negative or non-numeric time, ...).
ordered_json read_ablation(const std::filesystem::path& path);

// The report of iterations 0..last: each iteration's metrics.json (and iteration 0's
// eval.json), the run file's schedule, every iteration's ablation.json.
ordered_json build_report(const RunSpec& spec, const Layout& layout, int last);

// The picture of a report; `schedule_svg` (braid-schedgen's drawing, or "") is placed
// below the charts.
std::string report_svg(const ordered_json& report, const std::string& schedule_svg = "");

// braid-schedgen's drawing of a braid.schedule file (its timeline and memory), or
// nullopt with *why set when the file cannot be read.
std::optional<std::string> schedule_file_svg(const std::filesystem::path& schedule, std::string* why);

// OUT/iter-i/steps.json: the wall times of the iteration's rollout and training steps as
// braid run ran them (process start, loads and files included), {"rollout": s, "train": s};
// written when both ran in one go.
std::filesystem::path step_times_file(const Layout& layout, int iteration);
void write_step_times(const Layout& layout, int iteration, double rollout, double train);
// The object, or null when the file is not there.
ordered_json step_times(const Layout& layout, int iteration);

// Each call's seconds as its tool's --stats reports it (actor_gen: the slowest rank's
// generation; ref_inf, critic_inf, reward_inf: summed over braid-score's ranks, divided by
// them; actor_train, critic_train: braid-train's, a fused pipeline's step time for both).
ordered_json measured_calls(const Layout& layout, int iteration);

// build_report + report_svg into OUT/report.json and OUT/report.svg.
void write_report(const RunSpec& spec, const Layout& layout, int last);

}  // namespace braid::driver
