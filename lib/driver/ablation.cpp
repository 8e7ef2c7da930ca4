#include "driver/ablation.hpp"

#include <algorithm>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "driver/report.hpp"
#include "driver/run_loop.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

// A stage's wall_seconds from its stats file; InputError naming the file when it has none.
double stage_seconds(const fs::path& stats) {
  const json doc = load_json_file(stats.string());
  if (!doc.is_object() || !doc.contains("wall_seconds") || !doc["wall_seconds"].is_number() ||
      !std::isfinite(doc["wall_seconds"].get<double>()) || doc["wall_seconds"].get<double>() < 0) {
    throw InputError(stats.string(), "wall_seconds", "missing or not a number of seconds");
  }
  return doc["wall_seconds"].get<double>();
}

// braid-meshplan's predicted iteration times (plan's predicted.fused_s, .serial_s).
struct Prediction {
  double fused = 0, serial = 0;
};

Prediction read_prediction(const fs::path& plan) {
  const json doc = load_json_file(plan.string());
  Checker c(plan.string());
  c.format(doc, "braid.plan", 1);
  if (!doc.is_object()) c.check();
  const json& p = c.object(doc, "", "predicted");
  Prediction out;
  if (p.is_object()) {
    out.fused = c.number(p, "predicted", "fused_s", {.min = 0}).value_or(0);
    out.serial = c.number(p, "predicted", "serial_s", {.min = 0}).value_or(0);
  }
  c.check();
  return out;
}

// The iterations the re-run reads (the start, the one its rollout's policy comes from, the
// one before), linked into the scratch folder: OUT/iter-i/ablation/iter-j -> ../../iter-j,
// so the re-run reads the run's own inputs and writes only its own iter-i.
void link_inputs(const Layout& layout, const Layout& scratch, int i, const RunSpec& spec) {
  fs::create_directories(scratch.out());
  for (int j : {0, rollout_policy(spec, i), i - 1}) {
    const fs::path link = scratch.iteration_dir(j);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(link, ec))) continue;
    if (!fs::is_directory(layout.iteration_dir(j), ec)) continue;
    fs::create_directory_symlink(fs::path("..") / ".." / layout.iteration_dir(j).filename(), link);
  }
}

}  // namespace

bool ablates(const RunSpec& spec, int i) {
  if (!spec.ablation || i < 1 || i > spec.iterations) return false;
  const AblationSpec& a = *spec.ablation;
  if (a.every > 0 && i % a.every == 0) return true;
  return std::find(a.iterations.begin(), a.iterations.end(), i) != a.iterations.end();
}

RunSpec serial_spec(const RunSpec& spec) {
  RunSpec s = spec;
  s.fuse = false;
  s.migrate_threshold.reset();
  s.migrate_to.reset();
  s.schedule.reset();
  s.plan_schedule = false;
  if (spec.schedule) {
    s.ranks = 1;  // the fused pipeline's ranks; unfused training keeps its data-parallel ranks
    s.train_tp = 1;
  }
  // The re-run's training writes whole checkpoints; it reads the iteration before's stage
  // files by their stem, as every tool does.
  s.actor_stages = 1;
  s.critic_stages = 1;
  return s;
}

Layout ablation_layout(const Layout& layout, int i) { return Layout(layout.iteration_dir(i) / "ablation"); }

std::vector<Step> ablation_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  const RunSpec serial = serial_spec(spec);
  const Layout scratch = ablation_layout(layout, i);
  const Step rollout = rollout_step(serial, scratch, opt, i);
  // generate | score split in two steps, one after the other: generation, then scoring
  // of every shard it wrote.
  Step gen{.name = fmt::format("iteration {} ablation: serial generate", i), .pipeline = {rollout.pipeline.at(0)},
           .inputs = rollout.inputs, .outputs = {scratch.stats_file(i, "generate")},
           .stale = {scratch.samples_dir(i), scratch.stats_file(i, "generate")}, .restart = true};
  Command score;
  if (!rollout.then.empty()) {
    score = rollout.then.front();  // braid-score under mpirun: it lists the shards already
  } else {
    score = rollout.pipeline.at(1);
    score.argv.erase(score.argv.begin() + 1);  // "-": the shards are listed instead
    score.shards_from = scratch.samples_dir(i);
    score.shards_pattern = "gen-*.h5";
    score.shards_at = 1;
  }
  Step sc{.name = fmt::format("iteration {} ablation: serial score", i), .pipeline = {score},
          .inputs = {scratch.stats_file(i, "generate")}, .outputs = {scratch.stats_file(i, "score")},
          .stale = {scratch.scored_dir(i), scratch.stats_file(i, "score")}, .restart = true};
  for (const auto& in : rollout.inputs) {
    if (std::find(sc.inputs.begin(), sc.inputs.end(), in) == sc.inputs.end()) sc.inputs.push_back(in);
  }
  if (!spec.schedule) return {gen, sc};  // training is unfused in both: the iteration's own is the serial one's
  Step train = train_step(serial, scratch, opt, i);
  train.name = fmt::format("iteration {} ablation: serial train", i);
  train.restart = true;
  return {gen, sc, train};
}

bool ablation_complete(const Layout& layout, int i) {
  std::error_code ec;
  if (!fs::is_regular_file(layout.ablation_file(i), ec)) return false;
  try {
    read_ablation(layout.ablation_file(i));
    return true;
  } catch (const std::exception& e) {
    log::warn("{}; the ablation is measured again", e.what());
    return false;
  }
}

ordered_json ablation_document(const RunSpec& spec, const Layout& layout, int i) {
  const Layout scratch = ablation_layout(layout, i);
  ordered_json fused_m = ordered_json::object();
  const double fg = stage_seconds(layout.stats_file(i, "generate"));
  const double ft = stage_seconds(layout.stats_file(i, "train"));
  fused_m["generate"] = fg;  // fused: the scoring ran inside the generation's processes
  double fused_total = fg + ft;
  if (!spec.fuse) {
    const double fs_ = stage_seconds(layout.stats_file(i, "score"));
    fused_m["score"] = fs_;  // a pipe: scoring overlapped the generation; the longer of the two counts
    fused_total = std::max(fg, fs_) + ft;
  }
  fused_m["train"] = ft;
  fused_m["total"] = fused_total;
  const double sg = stage_seconds(scratch.stats_file(i, "generate"));
  const double ss = stage_seconds(scratch.stats_file(i, "score"));
  const double st = spec.schedule ? stage_seconds(scratch.stats_file(i, "train")) : ft;
  ordered_json serial_m = {{"generate", sg}, {"score", ss}, {"train", st}, {"total", sg + ss + st}};

  std::vector<std::string> fusions;
  if (spec.fuse) fusions.emplace_back("inter_stage");
  if (spec.schedule) fusions.emplace_back("intra_stage");
  ordered_json fused = {{"name", "fused"}, {"fusions", fusions}, {"measured", fused_m}};
  ordered_json serial = {{"name", "serial"}, {"fusions", json::array()}, {"measured", serial_m}};

  ordered_json settings = {{"rollout_ranks", spec.rollout_ranks},
                           {"migrate_threshold", spec.migrate_threshold.value_or("")},
                           {"migrate_to", spec.migrate_to.value_or(0)},
                           {"fuse", spec.fuse},
                           {"train_schedule", spec.schedule ? spec.schedule->string() : std::string()},
                           {"threads", spec.threads.value_or(0)},
                           {"timing", "each stage's wall_seconds from its stats file (from its first step: process "
                                      "start and model loads not included)"},
                           {"serial_rerun", scratch.iteration_dir(i).lexically_relative(layout.out()).string()},
                           {"serial_train", spec.schedule ? "re-run without the schedule"
                                                          : "the iteration's own (training is unfused in both)"}};
  if (spec.fuse && spec.schedule) {
    settings["one_fusion_off"] = "the variants with one fusion put together from the measured stages (rollout and "
                                 "training run one after the other)";
  }
  ordered_json doc = {{"format", kAblationFormat}, {"version", kReportVersion}, {"iteration", i}, {"settings", settings}};
  if (spec.ablation && spec.ablation->plan) {
    const Prediction p = read_prediction(*spec.ablation->plan);
    fused["predicted"] = {{"total", p.fused}};
    serial["predicted"] = {{"total", p.serial}};
    doc["prediction"] = {{"tool", "braid-meshplan"}, {"plan", spec.ablation->plan->string()},
                         {"fused_s", p.fused}, {"serial_s", p.serial}};
  }
  ordered_json variants = ordered_json::array({fused});
  if (spec.fuse && spec.schedule) {
    // One fusion off at a time: the stages run one after the other, so each such variant is
    // the measured stages put together (the rollout of one, the training of the other).
    auto mixed = [&](const char* name, const char* fusion, bool fused_rollout) {
      ordered_json m = ordered_json::object();
      double rollout = 0;
      if (fused_rollout) {
        m["generate"] = fg;
        rollout = fg;
      } else {
        m["generate"] = sg;
        m["score"] = ss;
        rollout = sg + ss;
      }
      const double train = fused_rollout ? st : ft;
      m["train"] = train;
      m["total"] = rollout + train;
      return ordered_json{{"name", name}, {"fusions", {fusion}}, {"measured", m}};
    };
    variants.push_back(mixed("inter-stage only", "inter_stage", true));
    variants.push_back(mixed("intra-stage only", "intra_stage", false));
  }
  variants.push_back(serial);
  doc["variants"] = variants;
  return doc;
}

void run_ablation(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  const Layout scratch = ablation_layout(layout, i);
  std::error_code ec;
  fs::remove_all(scratch.iteration_dir(i), ec);  // an interrupted re-run is timed again whole
  link_inputs(layout, scratch, i, spec);
  for (const Step& step : ablation_steps(spec, layout, opt, i)) {
    log::info("{}", step.name);
    execute_step(step);
  }
  const ordered_json doc = ablation_document(spec, layout, i);
  write_text_file(layout.ablation_file(i).string(), doc.dump(2) + "\n");
  const auto& v = doc["variants"];
  const auto& last = v.back();
  log::info("iteration {} ablation: fused {:.2f} s, serial {:.2f} s (measured){}", i,
            v[0]["measured"]["total"].get<double>(), last["measured"]["total"].get<double>(),
            v[0].contains("predicted") ? fmt::format("; predicted fused {:.2f} s, serial {:.2f} s",
                                                     v[0]["predicted"]["total"].get<double>(),
                                                     last["predicted"]["total"].get<double>())
                                       : std::string());
}

}  // namespace braid::driver
