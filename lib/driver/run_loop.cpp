#include "driver/run_loop.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/registry.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "driver/ablation.hpp"
#include "driver/dynamic_sampling.hpp"
#include "driver/metrics.hpp"
#include "driver/retention.hpp"
#include "driver/report.hpp"
#include "core/shell.hpp"
#include "driver/step_identity.hpp"
#include "driver/verify.hpp"
#include "io/fingerprint.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;
using Clock = fs::file_time_type;

// The newest / oldest modification time of a file or of a checkpoint's stage files.
std::optional<Clock> newest(const fs::path& p) {
  std::optional<Clock> t;
  std::error_code ec;
  for (const auto& f : checkpoint_files_of(p)) {
    const auto ft = fs::last_write_time(f, ec);
    if (!ec && (!t || ft > *t)) t = ft;
  }
  return t;
}

std::optional<Clock> oldest(const fs::path& p) {
  std::optional<Clock> t;
  std::error_code ec;
  for (const auto& f : checkpoint_files_of(p)) {
    const auto ft = fs::last_write_time(f, ec);
    if (!ec && (!t || ft < *t)) t = ft;
  }
  return t;
}

std::optional<Clock> newest_input(const Step& step) {
  std::optional<Clock> t;
  for (const auto& in : step.inputs) {
    const auto ft = newest(in);
    if (ft && (!t || *ft > *t)) t = ft;
  }
  return t;
}

// Some output exists but is older than an input: made from something that has changed since.
bool has_stale_output(const Step& step) {
  const auto in = newest_input(step);
  if (!in) return false;
  return std::any_of(step.outputs.begin(), step.outputs.end(), [&](const fs::path& out) {
    const auto t = oldest(out);
    return t && *t < *in;
  });
}

std::vector<std::string> expand_shards(const Command& c) {
  std::vector<std::string> argv = c.argv;
  if (!c.shards_from) return argv;
  // The pattern is "<prefix>*<suffix>"; the shards' own names never hold a '*'.
  const auto star = c.shards_pattern.find('*');
  const std::string prefix = c.shards_pattern.substr(0, star);
  const std::string suffix = c.shards_pattern.substr(star + 1);
  std::vector<std::string> shards;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(*c.shards_from, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix)) {
      shards.push_back(e.path().string());
    }
  }
  std::sort(shards.begin(), shards.end());
  argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(c.shards_at), shards.begin(), shards.end());
  return argv;
}

// An iteration's metrics.json as a JSON object; nullopt when it is missing, unreadable or
// damaged (not JSON, not an object: a disk that filled, an edit), which the run redoes.
std::optional<ordered_json> read_iteration_metrics(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  try {
    ordered_json m = parse_ordered_json_text(read_text_file(p.string()), p.string());
    if (m.is_object()) return m;
  } catch (const InputError&) {
  }
  return std::nullopt;
}

// A damaged metrics.json is removed, with a warning, so that it is made again.
void remove_damaged_metrics(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec) || read_iteration_metrics(p)) return;
  log::warn("{} is damaged (not a JSON object); it is made again", p.string());
  fs::remove(p, ec);
}

// OUT/metrics.jsonl: every iteration's metrics.json so far, one line each.
void write_metrics_file(const Layout& layout, int iterations) {
  std::string text;
  if (auto start = start_metrics(layout)) text += start->dump() + "\n";
  for (int i = 1; i <= iterations; ++i) {
    if (auto m = read_iteration_metrics(layout.iteration_metrics(i))) text += m->dump() + "\n";
  }
  write_text_file(layout.metrics_file().string(), text);
}

// Whether argv[0] would start: a path that is executable, or a name found on PATH.
bool can_start(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Every program the run will start, checked before anything starts, so that a missing
// braid-train is found now and not after the first iteration's generation.
void check_programs(const std::vector<Step>& steps) {
  std::vector<std::string> missing;
  for (const auto& step : steps) {
    std::vector<Command> commands = step.pipeline;
    commands.insert(commands.end(), step.then.begin(), step.then.end());
    for (const auto& c : commands) {
      const std::string& program = c.argv.front();
      if (!can_start(program) && std::find(missing.begin(), missing.end(), program) == missing.end()) {
        missing.push_back(program);
      }
    }
  }
  if (!missing.empty()) {
    throw std::runtime_error(fmt::format("cannot find {} (looked beside the braid executable, then on PATH)",
                                         fmt::join(missing, ", ")));
  }
}

// A run on "device": "cuda" where this process sees no GPU (or braid has no CUDA) is
// refused before anything starts, naming the device, rather than by the first tool that
// loads a model, after the init steps. Not when mpirun is given hosts: the ranks may have
// the GPUs the driver's host lacks.
void check_device(const RunSpec& spec) {
  if (!spec.device) return;
  const auto device = backend::parse_device(*spec.device);
  if (!device || device->kind != backend::DeviceKind::cuda) return;
  for (const std::string& w : spec.mpirun_options) {
    if (w == "--hostfile" || w == "--host" || w == "-H" || w == "--machinefile") return;
  }
  if (const std::string why = backend::cuda_unavailable_reason(); !why.empty()) {
    throw InputError(spec.file.string(), "device",
                     fmt::format("{}: {}; every stage tool would refuse it (run on a machine with a GPU, or set "
                                 "\"device\": \"cpu\")",
                                 device->to_string(), why));
  }
}

std::string commands_line(const std::vector<Command>& pipeline) {
  std::string line;
  for (const auto& c : pipeline) {
    std::vector<std::string> words;
    for (std::size_t i = 0; i <= c.argv.size(); ++i) {
      if (c.shards_from && i == c.shards_at) words.push_back(shell_quote(c.shards_from->string()) + "/" + c.shards_pattern);
      if (i < c.argv.size()) words.push_back(shell_quote(c.argv[i]));
    }
    if (!line.empty()) line += " | ";
    for (std::size_t i = 0; i < words.size(); ++i) line += (i > 0 ? " " : "") + words[i];
  }
  return line;
}

// A step as one shell line: its pipeline, then (&&) its second one.
std::string pipeline_line(const Step& step) {
  std::string line = commands_line(step.pipeline);
  if (!step.then.empty()) line += " && " + commands_line(step.then);
  return line;
}

void remove_files(const std::vector<fs::path>& files) {
  for (const auto& p : files) {
    std::error_code ec;
    for (const auto& f : checkpoint_files_of(p)) fs::remove(f, ec);
    fs::remove(p, ec);
  }
}

// A step that looks done (every output there, none older than an input) whose checkpoints
// are not all good: its outputs and leftovers are removed, so that it is due again, and
// every later step with it, since they read what it rewrites.
bool checkpoints_damaged(const Step& step) {
  std::vector<fs::path> files;
  for (const auto* list : {&step.outputs, &step.stale}) {
    for (const auto& f : *list) {
      if (f.extension() == ".h5" && std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
  }
  const auto why = damaged_checkpoint(files);
  if (!why) return false;
  log::warn("{}: {}; it is done again", step.name, *why);
  remove_files(step.outputs);
  remove_files(step.stale);
  return true;
}

// An iteration's training that looks done but is not this run's (driver/step_identity.hpp):
// another checkpoint in its place is to be trained again (its caller removes it, once it knows
// the step can run); checkpoints trained with other options than the run file gives now are
// refused unless --force.
bool train_not_this_runs(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, const Step& train, int i) {
  if (const auto why = foreign_checkpoints(spec, layout, opt, i)) {
    log::warn("{}: {}; it is done again", train.name, *why);
  } else if (const auto changed = changed_train_options(spec, layout, opt, i); !changed.empty()) {
    const std::string list = fmt::format("{}", fmt::join(changed, "; "));
    if (!opt.force) {
      throw InputError(layout.checkpoint(i, "actor").string(), "made_from",
                       fmt::format("iteration {} was trained with other options than the run file gives now ({}): "
                                   "braid run --force trains it again, with every iteration after it, or use "
                                   "another output folder",
                                   i, list));
    }
    log::warn("{}: trained with other options ({}); it is done again (--force)", train.name, list);
  } else {
    return false;
  }
  return true;
}

// An iteration's rollout that looks done but whose scored shards are not all there and
// good: the bad shards and score.stats.json are removed, so generate | score runs again
// (keeping the complete shards) and training after it.
bool scored_shards_damaged(const Layout& layout, int iteration, const Step& rollout) {
  std::vector<fs::path> damaged;
  const auto why = damaged_scored_shards(layout, iteration, &damaged);
  if (!why) return false;
  log::warn("{}: {}; it is done again", rollout.name, *why);
  remove_files(damaged);
  remove_files({layout.stats_file(iteration, "score")});
  return true;
}

// Dynamic sampling: more rounds of iteration i's rollout while too few of its groups have
// rewards that are not all equal (driver/dynamic_sampling.hpp); then its data.json. Whether
// a round ran now.
bool refill(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  bool ran = false;
  for (int r = 1; r < spec.data->dynamic_rounds; ++r) {
    const Step round = rollout_step(spec, layout, opt, i, r);
    if (!step_due(round)) continue;  // done before (a resumed run)
    const RoundCount c = count_groups(layout, i);
    if (c.kept >= spec.data->batch_prompts) break;
    log::info("iteration {}: {} of {} groups have rewards not all equal, {} wanted: round {} over {} more prompts", i,
              c.kept, c.groups, spec.data->batch_prompts, r, spec.data->batch_prompts);
    execute_step(round);
    ran = true;
  }
  const auto d = record_rounds(spec, layout, i);
  if (d["kept"].get<std::int64_t>() < spec.data->batch_prompts) {
    log::warn("iteration {}: {} groups with rewards not all equal after {} rounds, fewer than the {} wanted: it trains "
              "on those",
              i, d["kept"].get<std::int64_t>(), d["rounds"].get<int>(), spec.data->batch_prompts);
  }
  return ran;
}

}  // namespace

StageFailed::StageFailed(const std::string& step, const ProcessFailure& f)
    : std::runtime_error(fmt::format("{}: {} failed with {}: {}", step, f.stage, f.describe(), f.command)),
      exit_code_(f.signal == 0 && f.exit_code != 0 ? f.exit_code : 1) {}

bool step_due(const Step& step) {
  for (const auto& out : step.outputs) {
    if (!checkpoint_present(out)) return true;
  }
  return has_stale_output(step);
}

void execute_step(const Step& step) { execute_steps({step}); }

void execute_steps(const std::vector<Step>& steps) {
  std::vector<std::vector<Process>> pipelines, then;
  for (const Step& step : steps) {
    if (step.restart || has_stale_output(step)) {
      if (!step.restart) log::info("{}: outputs are older than their inputs; starting it afresh", step.name);
      for (const auto& p : step.stale) {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    }
    std::vector<Process>& processes = pipelines.emplace_back();
    for (const auto& c : step.pipeline) {
      if (c.shards_from) fs::create_directories(*c.shards_from);
      processes.push_back(Process{.stage = c.stage, .argv = expand_shards(c)});
    }
    if (!step.then.empty()) then.emplace_back();
    for (const auto& out : step.outputs) {
      if (out.has_parent_path()) fs::create_directories(out.parent_path());
    }
  }
  auto fail = [&](const ProcessFailure& failure) {
    std::string names;
    for (const Step& step : steps) {
      for (const auto* commands : {&step.pipeline, &step.then}) {
        for (const auto& c : *commands) {
          if (c.stage == failure.stage) names = step.name;
        }
      }
    }
    throw StageFailed(names.empty() ? steps.front().name : names, failure);
  };
  if (auto failure = run_pipelines(pipelines)) fail(*failure);
  if (then.empty()) return;
  // The second pipelines read what the first ones wrote (the shards are listed now).
  std::size_t k = 0;
  for (const Step& step : steps) {
    if (step.then.empty()) continue;
    for (const auto& c : step.then) then[k].push_back(Process{.stage = c.stage, .argv = expand_shards(c)});
    ++k;
  }
  if (auto failure = run_pipelines(then)) fail(*failure);
}

RunResult run_loop(const RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  RunResult result;
  fs::create_directories(layout.out());
  std::vector<Step> first = init_steps(spec, layout, opt);
  first.push_back(rollout_step(spec, layout, opt, 1));
  first.push_back(train_step(spec, layout, opt, 1));
  if (evaluates(spec, 0)) first.push_back(eval_step(spec, layout, opt, 0));
  check_programs(first);
  check_device(spec);
  for (const auto& step : init_steps(spec, layout, opt)) {
    if (step_due(step) || checkpoints_damaged(step)) execute_step(step);
  }
  for (int i = 1; i <= spec.iterations; ++i) remove_damaged_metrics(layout.iteration_metrics(i));
  // rolled_out[i]: iteration i's rollout ran now, so its training must too.
  std::vector<bool> rolled_out(static_cast<std::size_t>(spec.iterations) + 2, false);
  if (evaluates(spec, 0)) {
    const Step ev = eval_step(spec, layout, opt, 0);
    if (step_due(ev)) {
      log::info("evaluating the start actor");
      execute_step(ev);
    }
  }
  for (int i = 1; i <= spec.iterations; ++i) {
    const Step rollout = rollout_step(spec, layout, opt, i);
    const Step train = train_step(spec, layout, opt, i);
    const bool rollout_due = step_due(rollout) || scored_shards_damaged(layout, i, rollout);
    const auto t0 = std::chrono::steady_clock::now();
    const auto removed = [&](int needed, const Step& step) {
      if (!pruned(layout, needed)) return;
      throw InputError(spec.file.string(), "checkpoints",
                       fmt::format("{} must run again, but the checkpoints of iteration {} it starts from were removed "
                                   "(checkpoints.save_every / keep_last; {}): run it again in a new folder, or keep more",
                                   step.name, needed, (layout.iteration_dir(needed) / "pruned.json").string()));
    };
    if (rollout_due) removed(rollout_policy(spec, i), rollout);
    double rollout_seconds = -1;
    if (rollout_due) {
      log::info("iteration {} of {}: {}", i, spec.iterations, rollout.name);
      execute_step(rollout);
      rolled_out[static_cast<std::size_t>(i)] = true;
      rollout_seconds = seconds_since(t0);
    }
    if (dynamic_sampling(spec)) rolled_out[static_cast<std::size_t>(i)] = refill(spec, layout, opt, i) || rolled_out[static_cast<std::size_t>(i)];
    std::vector<Step> group;
    const bool train_due = rolled_out[static_cast<std::size_t>(i)] || step_due(train) || checkpoints_damaged(train);
    const bool not_this_runs = !train_due && train_not_this_runs(spec, layout, opt, train, i);
    if (train_due || not_this_runs) {
      removed(i - 1, train);  // first: a step that cannot run again keeps the files there
      if (not_this_runs) {
        remove_files(train.outputs);
        remove_files(train.stale);
      }
      group.push_back(train);
    }
    // Async: the next rollout reads nothing this training writes (rollout_policy), so the
    // two run at once, as two processes (pipelines) side by side.
    if (spec.async && i < spec.iterations) {
      const Step next = rollout_step(spec, layout, opt, i + 1);
      if (step_due(next) || scored_shards_damaged(layout, i + 1, next)) {
        group.push_back(next);
        rolled_out[static_cast<std::size_t>(i) + 1] = true;
      }
    }
    const bool ran = rollout_due || !group.empty();
    if (group.empty()) {
      log::debug("iteration {} is complete", i);
    } else {
      std::vector<std::string> names;
      for (const Step& s : group) names.push_back(s.name);
      log::info("iteration {} of {}: {}", i, spec.iterations, fmt::join(names, " beside "));
      const auto t1 = std::chrono::steady_clock::now();
      execute_steps(group);
      if (group.front().name == train.name) ++result.iterations_run;
      // The steps' wall times, beside the prediction in the report (one after the other only).
      if (rollout_seconds >= 0 && group.size() == 1 && group.front().name == train.name) {
        write_step_times(layout, i, rollout_seconds, seconds_since(t1));
      }
    }
    std::vector<fs::path> measured = train.outputs;
    if (evaluates(spec, i)) {
      const Step ev = eval_step(spec, layout, opt, i);
      if (step_due(ev)) execute_step(ev);
      measured.insert(measured.end(), ev.outputs.begin(), ev.outputs.end());
    }
    // metrics.json follows the checkpoints and the evaluation: recomputed whenever they are newer.
    const fs::path metrics = layout.iteration_metrics(i);
    const auto written = newest(metrics);
    const auto trained = newest_input(Step{.name = "", .pipeline = {}, .inputs = measured, .outputs = {},
                                           .stale = {}});
    if (!written || (trained && *written < *trained)) {
      const ordered_json m = iteration_metrics(
          layout, i, ran ? std::optional(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())
                         : std::nullopt);
      write_text_file(metrics.string(), m.dump() + "\n");
      log::info("{}", summary_line(m));
      write_metrics_file(layout, spec.iterations);
      write_report(spec, layout, i);  // the report so far, after every iteration done now
    }
    // The ablation: the iteration again from the same inputs with the fusions off, in a
    // scratch folder; a complete ablation.json is kept.
    if (ablates(spec, i) && !ablation_complete(layout, i)) {
      log::info("iteration {} of {}: the ablation (the iteration again with the fusions off)", i, spec.iterations);
      run_ablation(spec, layout, opt, i);
      write_report(spec, layout, i);
    }
    // Iteration i is complete: the checkpoints no step will read again go (driver/retention.hpp).
    if (!pruned(layout, i)) prune_checkpoints(spec, layout, i);
  }
  write_metrics_file(layout, spec.iterations);
  write_report(spec, layout, spec.iterations);  // rewritten only when it differs: a finished run's stays
  result.actor = actor_after(spec, layout, spec.iterations);
  if (spec.uses_critic()) result.critic = critic_after(spec, layout, spec.iterations);
  return result;
}

void check_output_folder(const fs::path& out) {
  std::error_code ec;
  fs::path p = out.empty() ? fs::path(".") : out;
  while (!p.empty() && !fs::exists(p, ec)) {
    const fs::path parent = p.has_parent_path() && p.parent_path() != p ? p.parent_path() : fs::path(".");
    if (parent == p) break;
    p = parent;
  }
  if (!fs::is_directory(p, ec)) {
    throw InputError(p.string(), "", fmt::format("cannot hold the run's folder {}: it is not a folder", out.string()));
  }
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    throw InputError(p.string(), "", fmt::format("cannot write the run's folder {} there: {}", out.string(),
                                                 std::strerror(errno)));
  }
}

std::vector<std::string> prepare_plan(RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  check_output_folder(layout.out());
  std::vector<std::string> lines;
  if (!spec.run_plan) return lines;
  RunPlan& plan = *spec.run_plan;
  // A file is made again when it is missing, older than one of its inputs, or made from
  // other options or inputs than its command line gives now (its made_from record; the
  // differences are logged). A file that records nothing is judged by its time alone.
  auto due = [&](const fs::path& out, const std::vector<fs::path>& inputs, const std::vector<std::string>& argv,
                 const std::vector<std::pair<std::string, std::string>>& roles) {
    const auto made = newest(out);
    if (!made) return true;
    if (std::any_of(inputs.begin(), inputs.end(), [&](const fs::path& in) {
          const auto t = newest(in);
          return t && *t > *made;
        })) {
      return true;
    }
    std::optional<ordered_json> record;
    try {
      const json doc = load_json_file(out.string());
      if (doc.is_object() && doc.contains("made_from")) {
        record = io::parse_made_from(doc["made_from"].dump(), out.string());
        if (auto why = made_from_problem(*record)) throw InputError(out.string(), "made_from", *why);
      }
    } catch (const InputError& e) {
      log::warn("{}: made again: {}", out.string(), e.what());
      return true;
    }
    if (!record) return false;
    const auto diff = output_record_differences(*record, fs::path(argv.front()).filename().string(), argv, roles);
    if (diff.empty()) return false;
    log::info("{}: made again, made from other options or inputs: {}", out.string(), fmt::join(diff, "; "));
    return true;
  };
  auto run = [&](const std::string& stage, const std::vector<std::string>& argv, const fs::path& out) {
    lines.push_back("# " + shell_line(argv) + "   (run now: every command below depends on it)");
    log::info("{}: {}", stage, shell_line(argv));
    fs::create_directories(out.parent_path());
    if (auto failure = run_pipeline({Process{.stage = stage, .argv = argv}})) throw StageFailed("the plan", *failure);
  };
  if (plan.request && !plan.applied) {
    const PlanRequest& req = *plan.request;
    const fs::path out = made_plan_file(layout.out());
    std::vector<fs::path> inputs = {req.experiment, req.cluster, spec.file};
    std::vector<std::pair<std::string, std::string>> roles = {{"experiment", req.experiment.string()},
                                                              {"cluster", req.cluster.string()}};
    std::vector<std::string> argv = {opt.tools.meshplan, req.experiment.string(), req.cluster.string()};
    if (req.profile) {
      inputs.push_back(*req.profile);
      roles.emplace_back("profile", req.profile->string());
      argv.insert(argv.end(), {"--profile", req.profile->string()});
    } else {
      roles.emplace_back("hardware", req.hardware);
      argv.insert(argv.end(), {"--hardware", req.hardware});
    }
    argv.insert(argv.end(), req.options.begin(), req.options.end());
    argv.insert(argv.end(), {"-q", "-o", out.string()});
    if (due(out, inputs, argv, roles)) {
      run("braid-meshplan", argv, out);
    } else {
      lines.push_back(fmt::format("# {}: kept (made by this command from the same experiment, cluster and profile)",
                                  out.string()));
    }
    plan.file = out;
    Checker c(spec.file.string());
    apply_plan(c, spec);
    c.check();
  }
  // The fused training's schedule: when the run fuses its training, or may run it fused
  // in its ablation.
  if (plan.applied && plan.schedspec.is_object() && (spec.plan_schedule || spec.ablation) && !spec.schedule) {
    const fs::path spec_file = plan_schedspec_file(layout.out());
    const fs::path schedule = plan_schedule_file(layout.out());
    const std::string text = plan.schedspec.dump(1) + "\n";
    std::error_code ec;
    if (!fs::is_regular_file(spec_file, ec) || read_text_file(spec_file.string()) != text) {
      fs::create_directories(layout.out());
      write_text_file(spec_file.string(), text);
    }
    std::vector<std::string> argv = {opt.tools.schedgen, spec_file.string(), "-o", schedule.string()};
    if (plan.schedgen_options.empty()) {
      argv.insert(argv.end(), {"--time-limit", "2"});
    } else {
      argv.insert(argv.end(), plan.schedgen_options.begin(), plan.schedgen_options.end());
    }
    if (due(schedule, {spec_file}, argv, {{"spec", spec_file.string()}})) {
      run("braid-schedgen", argv, schedule);
    } else {
      lines.push_back(fmt::format("# {}: kept (made by this command from {})", schedule.string(), spec_file.string()));
    }
    plan.schedule_file = schedule;
    if (spec.plan_schedule) use_plan_schedule(spec, schedule);
  }
  if (plan.applied && !plan.predictions.empty()) {
    const fs::path out = prediction_file(layout.out());
    fs::create_directories(layout.out());
    write_text_file(out.string(), record_prediction(spec).dump(2) + "\n");
    lines.push_back(fmt::format("# {}: the whole iteration predicted, each way", out.string()));
  }
  return lines;
}

std::vector<std::string> dry_run(const RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  std::vector<std::string> lines;
  if (spec.run_plan && spec.run_plan->applied) lines = spec.run_plan->summary();
  bool rewritten = false;  // an earlier step would run: everything after reads its new outputs
  for (const auto& step : init_steps(spec, layout, opt)) {
    // The start models are made independently of each other; the iterations form a chain.
    if (step_due(step)) {
      lines.push_back(pipeline_line(step));
      rewritten = true;
    }
  }
  // The start actor's evaluation reads the start models only.
  if (evaluates(spec, 0)) {
    const Step ev = eval_step(spec, layout, opt, 0);
    if (rewritten || step_due(ev)) lines.push_back(pipeline_line(ev));
  }
  // Steps that run at once are one shell line: each but the last in the background, then `wait`.
  int trained = 0;  // the iterations whose training the groups so far hold
  for (const auto& group : step_groups(spec, layout, opt)) {
    std::vector<std::string> parts, notes;
    bool trains = false;
    for (const auto& step : group) {
      if (step.name == train_step(spec, layout, opt, trained + 1).name) trains = true;
      if (rewritten || step_due(step)) {
        parts.push_back(pipeline_line(step));
        notes.insert(notes.end(), step.notes.begin(), step.notes.end());
      }
    }
    if (trains) ++trained;
    // The ablation after an iteration's training (and its evaluation, a group of its own).
    auto ablation_lines = [&](int i) {
      if (!ablates(spec, i) || (!rewritten && ablation_complete(layout, i))) return;
      lines.push_back(fmt::format("# iteration {}: the ablation, again with the fusions off in {}, then {}", i,
                                  ablation_layout(layout, i).iteration_dir(i).string(),
                                  layout.ablation_file(i).string()));
      for (const auto& step : ablation_steps(spec, layout, opt, i)) lines.push_back(pipeline_line(step));
    };
    const bool evaluated = group.size() == 1 && group.front().name == fmt::format("iteration {} eval", trained);
    const bool iteration_done = (trains && !evaluates(spec, trained)) || evaluated;
    if (parts.empty()) {
      if (iteration_done) ablation_lines(trained);
      continue;
    }
    rewritten = true;
    lines.insert(lines.end(), notes.begin(), notes.end());
    if (parts.size() == 1) {
      lines.push_back(parts.front());
    } else {
      lines.push_back(fmt::format("{} & {}; wait", fmt::join(parts.begin(), parts.end() - 1, " & "), parts.back()));
    }
    if (iteration_done) ablation_lines(trained);
  }
  return lines;
}

}  // namespace braid::driver
