#include "driver/ablation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "driver/prediction.hpp"
#include "driver/report.hpp"
#include "driver/retention.hpp"
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

// braid-meshplan's predicted iteration times (plan's predicted.fused_s, .serial_s), for a
// run without a plan of its own that names one in "ablation.plan".
struct PlanTotals {
  double fused = 0, serial = 0;
};

PlanTotals read_plan_totals(const fs::path& plan) {
  const json doc = load_json_file(plan.string());
  Checker c(plan.string());
  c.format(doc, "braid.plan", 1);
  if (!doc.is_object()) c.check();
  const json& p = c.object(doc, "", "predicted");
  PlanTotals out;
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

// One way's measured figures: each tool's wall_seconds (a fused rollout's scoring inside
// its generation's), the steps' wall times and their sum (the total), each call's seconds.
ordered_json measured(const RunSpec& way, const Layout& layout, int i) {
  ordered_json m = ordered_json::object();
  m["generate"] = stage_seconds(layout.stats_file(i, "generate"));
  if (!way.fuse) m["score"] = stage_seconds(layout.stats_file(i, "score"));
  m["train"] = stage_seconds(layout.stats_file(i, "train"));
  const ordered_json steps = step_times(layout, i);
  if (steps.is_object()) {
    m["rollout_step"] = steps["rollout"];
    m["train_step"] = steps["train"];
    m["total"] = steps["rollout"].get<double>() + steps["train"].get<double>();
  } else {
    // Steps not timed (a run resumed inside the iteration): the tools' own times.
    const double rollout = way.fuse ? m["generate"].get<double>()
                                    : std::max(m["generate"].get<double>(), m["score"].get<double>());
    m["total"] = rollout + m["train"].get<double>();
  }
  return m;
}

// The prediction of one way, as the variant's "predicted" and "calls.predicted".
void add_prediction(ordered_json& variant, const RunSpec& way) {
  if (!way.run_plan || !way.run_plan->applied) return;
  const auto p = predict_iteration(way);
  if (!p) return;
  ordered_json pred = {{"total", p->iteration}};
  for (const auto& s : p->steps) pred[s.name + "_step"] = s.seconds;
  variant["predicted"] = pred;
  ordered_json calls = ordered_json::object();
  for (const auto& [name, seconds] : p->calls) calls[name] = seconds;
  variant["calls"]["predicted"] = calls;
}

ordered_json variant(const RunSpec& way, const Layout& layout, int i) {
  std::vector<std::string> fusions;
  const Fusions f = fusions_of(way);
  if (f.inter) fusions.emplace_back("inter_stage");
  if (f.intra) fusions.emplace_back("intra_stage");
  ordered_json v = {{"name", fusions_name(f)}, {"fusions", fusions}, {"measured", measured(way, layout, i)}};
  v["calls"] = {{"measured", measured_calls(layout, i)}};
  add_prediction(v, way);
  return v;
}

}  // namespace

bool ablates(const RunSpec& spec, int i) {
  if (!spec.ablation || i < 1 || i > spec.iterations) return false;
  if (!other_way(spec)) return false;
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

std::optional<RunSpec> other_way(const RunSpec& spec) {
  const Fusions chosen = fusions_of(spec);
  if (spec.run_plan && spec.run_plan->applied && spec.run_plan->base) {
    const RunPlan& plan = *spec.run_plan;
    if (!(chosen == Fusions{})) return variant_spec(spec, Fusions{});
    // Serial chosen: every fusion the run can take (those the prediction considered).
    Fusions all{};
    for (const auto& p : plan.predictions) {
      all.inter = all.inter || p.fusions.inter;
      all.intra = all.intra || p.fusions.intra;
    }
    if (plan.predictions.empty()) {
      all = {spec.rollout_ranks > 1 && spec.rollout_tp == 1, plan.schedspec.is_object() && spec.uses_critic()};
    }
    if (all.intra && !plan.schedule_file) all.intra = false;  // no schedule made (yet): braid run makes it first
    if (all == Fusions{}) return std::nullopt;
    RunSpec s = variant_spec(spec, all);
    if (!(fusions_of(s) == all)) return std::nullopt;
    return s;
  }
  if (chosen == Fusions{}) return std::nullopt;
  return serial_spec(spec);
}

Layout ablation_layout(const Layout& layout, int i) { return Layout(layout.iteration_dir(i) / "ablation"); }

std::vector<Step> ablation_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  const auto other = other_way(spec);
  if (!other) return {};
  const Layout scratch = ablation_layout(layout, i);
  const std::string way = fusions_name(fusions_of(*other));
  Step rollout = rollout_step(*other, scratch, opt, i);
  rollout.name = fmt::format("iteration {} ablation: {} rollout", i, way);
  rollout.restart = true;
  Step train = train_step(*other, scratch, opt, i);
  train.name = fmt::format("iteration {} ablation: {} train", i, way);
  train.restart = true;
  return {rollout, train};
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
  const auto other = other_way(spec);
  if (!other) throw std::logic_error("ablation_document: no other way to run");
  const Layout scratch = ablation_layout(layout, i);
  ordered_json own = variant(spec, layout, i);
  ordered_json again = variant(*other, scratch, i);
  ordered_json settings = {{"rollout_ranks", spec.rollout_ranks},
                           {"migrate_threshold", spec.migrate_threshold.value_or("")},
                           {"migrate_to", spec.migrate_to.value_or(0)},
                           {"fuse", spec.fuse},
                           {"train_schedule", spec.schedule ? spec.schedule->string() : std::string()},
                           {"threads", spec.threads.value_or(0)},
                           {"timing", "total: the rollout's and the training's wall time as braid run ran them "
                                      "(process start, model loads and files included); generate, score, train: each "
                                      "tool's wall_seconds from its stats file"},
                           {"rerun", scratch.iteration_dir(i).lexically_relative(layout.out()).string()}};
  ordered_json doc = {{"format", kAblationFormat}, {"version", kReportVersion}, {"iteration", i}, {"settings", settings}};
  if (!own.contains("predicted") && spec.ablation && spec.ablation->plan) {
    const PlanTotals p = read_plan_totals(*spec.ablation->plan);
    const bool own_fused = !(fusions_of(spec) == Fusions{});
    own["predicted"] = {{"total", own_fused ? p.fused : p.serial}};
    again["predicted"] = {{"total", own_fused ? p.serial : p.fused}};
    doc["prediction"] = {{"tool", "braid-meshplan"}, {"plan", spec.ablation->plan->string()},
                         {"fused_s", p.fused}, {"serial_s", p.serial}};
  } else if (own.contains("predicted")) {
    doc["prediction"] = {{"tool", "braid run"}, {"file", prediction_file(layout.out()).string()}};
  }
  // The fused way first, then the serial one.
  const bool own_first = !(fusions_of(spec) == Fusions{});
  doc["variants"] = own_first ? ordered_json::array({own, again}) : ordered_json::array({again, own});
  return doc;
}

void run_ablation(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  const Layout scratch = ablation_layout(layout, i);
  std::error_code ec;
  fs::remove_all(scratch.iteration_dir(i), ec);  // an interrupted re-run is timed again whole
  link_inputs(layout, scratch, i, spec);
  std::vector<double> seconds;
  for (const Step& step : ablation_steps(spec, layout, opt, i)) {
    log::info("{}", step.name);
    const auto t0 = std::chrono::steady_clock::now();
    execute_step(step);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (seconds.size() == 2) write_step_times(scratch, i, seconds[0], seconds[1]);
  const ordered_json doc = ablation_document(spec, layout, i);
  write_text_file(layout.ablation_file(i).string(), doc.dump(2) + "\n");
  // A run that prunes its checkpoints keeps none of the re-run's: nothing reads them (a
  // complete ablation.json is not measured again), and each is a model and its AdamW state.
  if (spec.checkpoints) remove_checkpoints(*other_way(spec), scratch, i, i);
  for (const auto& v : doc["variants"]) {
    log::info("iteration {} ablation: {} {:.2f} s measured{}", i, v["name"].get<std::string>(),
              v["measured"]["total"].get<double>(),
              v.contains("predicted") ? fmt::format(", {:.2f} s predicted", v["predicted"]["total"].get<double>()) : "");
  }
}

}  // namespace braid::driver
