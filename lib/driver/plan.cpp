#include "driver/plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "driver/dynamic_sampling.hpp"
#include "driver/kl_control.hpp"
#include "driver/retention.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

using Argv = std::vector<std::string>;

void append(Argv& argv, const ToolFlags& flags) {
  for (const auto& [flag, value] : flags) {
    argv.push_back(flag);
    if (!value.empty()) argv.push_back(value);  // a switch has none
  }
}

void append_common(Argv& argv, const RunSpec& spec, const PlanOptions& opt, bool verbosity = true) {
  if (spec.threads) {
    argv.emplace_back("--threads");
    argv.push_back(std::to_string(*spec.threads));
  }
  if (spec.device) {
    argv.emplace_back("--device");
    argv.push_back(*spec.device);
  }
  if (spec.dtype) {
    argv.emplace_back("--dtype");
    argv.push_back(*spec.dtype);
  }
  if (verbosity) argv.insert(argv.end(), opt.verbosity.begin(), opt.verbosity.end());
}

// "mpirun OPTIONS -np N": the start of every command the run runs on several ranks.
Argv mpirun_prefix(const RunSpec& spec, const PlanOptions& opt, int ranks) {
  Argv argv = {opt.tools.mpirun};
  argv.insert(argv.end(), spec.mpirun_options.begin(), spec.mpirun_options.end());
  argv.insert(argv.end(), {"-np", std::to_string(ranks)});
  return argv;
}

// "--tp N" for a stage tool whose ranks split each model over a tensor-parallel group.
void append_tp(Argv& argv, int tp) {
  if (tp > 1) argv.insert(argv.end(), {"--tp", std::to_string(tp)});
}

// The plan's layout of a stage, as comments: each call it runs, and how it differs.
void add_notes(Step& step, const RunSpec& spec, const StageLayout RunPlan::*stage, std::string_view tool, int ranks,
               int tp) {
  if (!spec.run_plan || !spec.run_plan->applied) return;
  const RunPlan& plan = *spec.run_plan;
  const StageLayout& s = plan.*stage;
  for (const auto& name : s.calls) {
    if (const PlannedCall* pc = plan.call(name)) {
      step.notes.push_back(fmt::format("# {}: planned {} ({:.3f} s predicted) -> {} on {} rank(s){}", name, pc->layout(),
                                       pc->time_s, tool, ranks, tp > 1 ? fmt::format(", --tp {}", tp) : ""));
    }
  }
  for (const auto& n : s.notes) step.notes.push_back("#   " + n);
}

// Each iteration samples and shuffles with its own seed, derived from the run's.
std::string iteration_seed(const RunSpec& spec, int iteration) {
  return std::to_string(spec.seed * 10000 + static_cast<std::uint64_t>(iteration));
}

fs::path model_start(const ModelSource& src, const Layout& layout, std::string_view name) {
  return src.kind == ModelSource::Kind::init ? layout.checkpoint(0, name) : src.path;
}

// The files a checkpoint spec stands for, as make targets: a start checkpoint's files as
// they are on disk (a file, or its stage files); a trained one's as braid-train will
// write them (stage files when the fused pipeline trains the model in several stages).
std::vector<fs::path> start_files(const fs::path& spec) {
  auto files = checkpoint_files_of(spec);
  return files.empty() ? std::vector<fs::path>{spec} : files;
}

std::vector<fs::path> model_files(const RunSpec& spec, const Layout& layout, std::string_view model, int iteration) {
  if (iteration == 0) {
    return start_files(model == "actor" ? actor_after(spec, layout, 0) : critic_after(spec, layout, 0));
  }
  return stage_files(layout.checkpoint(iteration, model), model == "actor" ? spec.actor_stages : spec.critic_stages);
}

void add_inputs(Step& step, const std::vector<fs::path>& files) {
  for (const auto& f : files) {
    if (std::find(step.inputs.begin(), step.inputs.end(), f) == step.inputs.end()) step.inputs.push_back(f);
  }
}

// The run's tools and template keyword arguments for conversations (braid-generate, braid eval).
void append_chat(Argv& argv, Step& step, const RunSpec& spec) {
  if (spec.tools) {
    argv.insert(argv.end(), {"--tools", spec.tools->string()});
    add_inputs(step, {*spec.tools});
  }
  if (spec.chat_template_kwargs) argv.insert(argv.end(), {"--chat-template-kwargs", *spec.chat_template_kwargs});
}

Step init_step(const ModelSource& src, const Layout& layout, const PlanOptions& opt, std::string_view name,
               bool value_head) {
  const fs::path out = layout.checkpoint(0, name);
  Argv argv = {opt.tools.braid, "init", "--config", src.path.string(), "--seed", std::to_string(src.seed)};
  if (value_head) {
    argv.emplace_back("--value-head");
    argv.emplace_back("--no-lm-head");
  }
  argv.insert(argv.end(), {"-o", out.string()});
  argv.insert(argv.end(), opt.verbosity.begin(), opt.verbosity.end());
  return Step{.name = fmt::format("init {}", name),
              .pipeline = {Command{.stage = "init", .argv = std::move(argv)}},
              .inputs = {src.path},
              .outputs = {out},
              .stale = {}};
}

// braid data: the run file's prompts through its field map, split into train and held-out.
Step data_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  const DataSpec& d = *spec.data;
  Argv argv = {opt.tools.braid, "data", spec.prompts.string(), "-o", layout.data_file("train").parent_path().string(),
               "--seed", std::to_string(d.seed)};
  for (const auto& f : d.fields) argv.insert(argv.end(), {"--field", f});
  if (d.heldout.count > 0) argv.insert(argv.end(), {"--heldout", std::to_string(d.heldout.count)});
  if (d.heldout.fraction > 0) argv.insert(argv.end(), {"--heldout", fmt::format("{}", d.heldout.fraction)});
  argv.insert(argv.end(), opt.verbosity.begin(), opt.verbosity.end());
  std::vector<fs::path> outputs = {layout.data_file("train")};
  if (d.heldout.any()) outputs.push_back(layout.data_file("heldout"));
  return Step{.name = "data", .pipeline = {Command{.stage = "data", .argv = std::move(argv)}}, .inputs = {spec.prompts},
              .outputs = outputs, .stale = outputs};
}

}  // namespace

Tools find_tools() {
  Tools tools;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return tools;
  tools.braid = self.string();
  auto beside = [&](std::string& tool) {
    const fs::path p = self.parent_path() / tool;
    if (::access(p.c_str(), X_OK) == 0) tool = p.string();
  };
  beside(tools.generate);
  beside(tools.score);
  beside(tools.train);
  beside(tools.meshplan);
  beside(tools.schedgen);
  return tools;
}

fs::path actor_after(const RunSpec& spec, const Layout& layout, int iteration) {
  return iteration == 0 ? model_start(spec.actor, layout, "actor") : layout.checkpoint(iteration, "actor");
}

fs::path critic_after(const RunSpec& spec, const Layout& layout, int iteration) {
  return iteration == 0 ? model_start(spec.critic, layout, "critic") : layout.checkpoint(iteration, "critic");
}

std::optional<fs::path> ref_checkpoint(const RunSpec& spec, const Layout& layout) {
  switch (spec.ref.kind) {
    case ModelSource::Kind::initial_actor: return actor_after(spec, layout, 0);
    case ModelSource::Kind::checkpoint:
    case ModelSource::Kind::init: return model_start(spec.ref, layout, "ref");
    default: return std::nullopt;
  }
}

std::optional<fs::path> reward_checkpoint(const RunSpec& spec, const Layout& layout) {
  if (spec.reward.kind == ModelSource::Kind::checkpoint || spec.reward.kind == ModelSource::Kind::init) {
    return model_start(spec.reward, layout, "reward");
  }
  return std::nullopt;
}

fs::path rollout_prompts(const RunSpec& spec, const Layout& layout) {
  return spec.data && spec.data->prepared() ? layout.data_file("train") : spec.prompts;
}

std::optional<std::int64_t> first_prompt(const RunSpec& spec, const Layout& layout, int iteration, int round) {
  if (!spec.data) return 0;
  const std::int64_t batch = spec.data->batch_prompts;
  if (!dynamic_sampling(spec)) return std::int64_t(iteration - 1) * batch;
  const auto first = dynamic_first_prompt(layout, iteration);
  if (!first) return std::nullopt;
  return *first + std::int64_t(round) * batch;
}

std::vector<Step> init_steps(const RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  std::vector<Step> steps;
  if (spec.data && spec.data->prepared()) steps.push_back(data_step(spec, layout, opt));
  using K = ModelSource::Kind;
  if (spec.actor.kind == K::init) steps.push_back(init_step(spec.actor, layout, opt, "actor", false));
  if (spec.uses_critic() && spec.critic.kind == K::init) {
    steps.push_back(init_step(spec.critic, layout, opt, "critic", true));
  }
  if (spec.ref.kind == K::init) steps.push_back(init_step(spec.ref, layout, opt, "ref", false));
  if (spec.reward.kind == K::init) steps.push_back(init_step(spec.reward, layout, opt, "reward", true));
  return steps;
}

int rollout_policy(const RunSpec& spec, int i) { return std::max(0, spec.async ? i - 2 : i - 1); }

Step rollout_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i, int round) {
  const int policy = rollout_policy(spec, i);
  const fs::path actor = actor_after(spec, layout, policy);
  // A dynamic-sampling round beyond the first writes beside it: gen-rR-*, scored-rR-*.
  const std::string tag = round > 0 ? fmt::format("-r{}", round) : "";
  const fs::path gen_stats = layout.stats_file(i, "generate" + tag);
  const fs::path score_stats = layout.stats_file(i, "score" + tag);
  Step step{.name = fmt::format("iteration {} generate | score{}", i, round > 0 ? fmt::format(" (round {})", round) : ""),
            .pipeline = {}, .inputs = {}, .outputs = {gen_stats, score_stats},
            .stale = {gen_stats, score_stats}};
  if (round == 0) {
    // Done again: every round of the iteration with it (their shards share the folders).
    step.stale.insert(step.stale.begin(), {layout.samples_dir(i), layout.scored_dir(i)});
    for (int r = 1; dynamic_sampling(spec) && r < spec.data->dynamic_rounds; ++r) {
      step.stale.push_back(layout.stats_file(i, fmt::format("generate-r{}", r)));
      step.stale.push_back(layout.stats_file(i, fmt::format("score-r{}", r)));
    }
    if (dynamic_sampling(spec)) step.stale.push_back(dynamic_record(layout, i));
  }
  if (round > 0) add_inputs(step, {layout.stats_file(i, round == 1 ? "score" : fmt::format("score-r{}", round - 1))});
  if (round == 0 && i > 1 && dynamic_sampling(spec)) add_inputs(step, {dynamic_record(layout, i - 1)});

  add_inputs(step, model_files(spec, layout, "actor", policy));
  const fs::path prompts = rollout_prompts(spec, layout);
  add_inputs(step, {prompts});

  // With overcommit, sample ids run on across iterations, so one seed gives every sample its
  // own stream and a deferred sample continues its own (docs/overlap.md).
  Argv gen;
  if (spec.rollout_ranks > 1) gen = mpirun_prefix(spec, opt, spec.rollout_ranks);
  add_notes(step, spec, &RunPlan::generate, "braid-generate", spec.rollout_ranks, spec.rollout_tp);
  gen.insert(gen.end(), {opt.tools.generate, "--actor", actor.string(), "--prompts", prompts.string(),
                         "-o", layout.samples_dir(i).string(), "--tokenizer", spec.tokenizer,
                         "--seed", iteration_seed(spec, spec.overcommit ? 0 : i), "--stats", gen_stats.string()});
  append(gen, spec.generate);
  if (spec.data) {
    // The stream: this iteration's batch (under overcommit its position is the deferred file's).
    const auto first = first_prompt(spec, layout, i, round);
    if (!spec.overcommit && (!first || *first > 0)) {
      gen.insert(gen.end(), {"--first-prompt", first ? std::to_string(*first)
                                                     : fmt::format("<from iteration {}'s data.json>", i - 1)});
    }
    if (spec.data->batch_prompts > 0) gen.insert(gen.end(), {"--batch-prompts", std::to_string(spec.data->batch_prompts)});
    if (spec.data->shuffle) gen.insert(gen.end(), {"--prompt-seed", std::to_string(spec.data->seed)});
    if (round > 0) gen.insert(gen.end(), {"--prefix", "gen" + tag});
    if (dynamic_sampling(spec) && round == 0) {
      step.notes.push_back(fmt::format("# iteration {}: dynamic sampling: up to {} more rounds of {} prompts while fewer "
                                       "than {} groups have rewards not all equal",
                                       i, spec.data->dynamic_rounds - 1, spec.data->batch_prompts,
                                       spec.data->batch_prompts));
    }
  }
  append_chat(gen, step, spec);
  if (spec.migrate_threshold) gen.insert(gen.end(), {"--migrate-threshold", *spec.migrate_threshold});
  if (spec.migrate_to) gen.insert(gen.end(), {"--migrate-to", std::to_string(*spec.migrate_to)});
  append_tp(gen, spec.rollout_tp);
  if (spec.overcommit) {
    gen.insert(gen.end(), {"--overcommit", std::to_string(*spec.overcommit), "--deferred-out",
                           layout.deferred_file(i).string()});
    if (i > 1) {
      gen.insert(gen.end(), {"--resume-deferred", layout.deferred_file(i - 1).string()});
      add_inputs(step, {layout.deferred_file(i - 1)});
    }
    step.outputs.push_back(layout.deferred_file(i));
    step.stale.push_back(layout.deferred_file(i));
    step.restart = true;
  }
  append_common(gen, spec, opt);

  Argv score = {opt.tools.score, "-", "-o", layout.scored_dir(i).string(), "--tokenizer", spec.tokenizer,
                "--algorithm", spec.algorithm, "--stats", score_stats.string()};
  if (round > 0) score.insert(score.end(), {"--prefix", "scored" + tag});
  if (auto ref = ref_checkpoint(spec, layout)) {
    score.insert(score.end(), {"--ref", ref->string()});
    add_inputs(step, start_files(*ref));
  }
  if (spec.uses_critic()) {
    const fs::path critic = critic_after(spec, layout, policy);
    score.insert(score.end(), {"--critic", critic.string()});
    add_inputs(step, model_files(spec, layout, "critic", policy));
  }
  if (auto reward = reward_checkpoint(spec, layout)) {
    score.insert(score.end(), {"--reward", reward->string()});
    add_inputs(step, start_files(*reward));
  } else if (spec.reward.kind == ModelSource::Kind::command) {
    score.insert(score.end(), {"--reward-cmd", spec.reward.command, "--reward-cmd-dir", spec.reward.command_dir.string()});
    if (spec.reward.command_timeout) {
      score.insert(score.end(), {"--reward-cmd-timeout", fmt::format("{}", *spec.reward.command_timeout)});
    }
  } else {
    score.insert(score.end(), {"--reward-rule", spec.reward.rule});
  }
  append(score, spec.score);
  if (spec.kl_target) {
    // Adaptive: from the previous iteration's metrics, known once it has run.
    const auto coef = iteration_kl_coef(spec, layout, i);
    score.insert(score.end(), {"--kl-coef", coef ? fmt::format("{}", *coef)
                                                 : fmt::format("<adaptive: from iteration {}'s metrics>", i - 1)});
  }
  // Fused: braid-generate's ranks score (lib/fuse), given braid-score's options after "--";
  // the log level is the process's, set by the generation's -q/-v.
  append_common(score, spec, opt, /*verbosity=*/!spec.fuse);
  if (spec.tokenizer != "byte") add_inputs(step, {spec.tokenizer});
  if (spec.fuse) {
    step.name = fmt::format("iteration {} generate + score (fused)", i);
    add_notes(step, spec, &RunPlan::score, "the fused rollout", spec.rollout_ranks, spec.rollout_tp);
    gen.emplace_back("--");
    gen.insert(gen.end(), score.begin() + 2, score.end());  // without braid-score and its "-"
    step.pipeline.push_back(Command{.stage = "generate+score", .argv = std::move(gen)});
    return step;
  }
  add_notes(step, spec, &RunPlan::score, "braid-score", spec.score_ranks, spec.score_tp);
  step.pipeline.push_back(Command{.stage = "generate", .argv = std::move(gen)});
  if (spec.score_ranks > 1) {
    // Under mpirun only rank 0 has stdin: braid-score scores the generated shards once
    // generation has written them all, named as arguments.
    step.name = fmt::format("iteration {} generate, then score", i);
    Argv mpi_score = mpirun_prefix(spec, opt, spec.score_ranks);
    mpi_score.push_back(score.front());
    const std::size_t shards_at = mpi_score.size();
    mpi_score.insert(mpi_score.end(), score.begin() + 2, score.end());  // without "-"
    append_tp(mpi_score, spec.score_tp);
    step.then.push_back(Command{.stage = "score", .argv = std::move(mpi_score), .shards_from = layout.samples_dir(i),
                                .shards_pattern = "gen-*.h5", .shards_at = shards_at});
    return step;
  }
  step.pipeline.push_back(Command{.stage = "score", .argv = std::move(score)});
  return step;
}

std::vector<fs::path> trained_checkpoints(const RunSpec& spec, const Layout& layout, int i) {
  std::vector<fs::path> out = model_files(spec, layout, "actor", i);
  if (spec.uses_critic()) {
    const auto critic = model_files(spec, layout, "critic", i);
    out.insert(out.end(), critic.begin(), critic.end());
  }
  return out;
}

Step train_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  // Checkpoints the retention removed (driver/retention.hpp) were made: nothing to make again.
  const auto outputs = pruned(layout, i) ? std::vector<fs::path>{} : trained_checkpoints(spec, layout, i);
  Step step{.name = fmt::format("iteration {} train", i), .pipeline = {}, .inputs = {layout.stats_file(i, "score")},
            .outputs = outputs, .stale = outputs};
  add_inputs(step, model_files(spec, layout, "actor", i - 1));
  for (std::string_view model : {"actor", "critic"}) {
    if (model == "critic" && !spec.uses_critic()) continue;
    const int stages = model == "actor" ? spec.actor_stages : spec.critic_stages;
    if (pruned(layout, i)) break;
    for (const auto& f : stage_files(optimizer_path(layout.checkpoint(i, model)), stages)) step.stale.push_back(f);
  }
  if (!pruned(layout, i)) step.stale.push_back(layout.stats_file(i, "train"));

  Argv argv;
  if (spec.schedule || spec.ranks > 1) argv = mpirun_prefix(spec, opt, spec.ranks);
  add_notes(step, spec, &RunPlan::train, "braid-train", spec.ranks, spec.train_tp);
  argv.insert(argv.end(), {opt.tools.train, spec.algorithm});
  const std::size_t shards_at = argv.size();
  argv.insert(argv.end(), {"--actor", actor_after(spec, layout, i - 1).string(), "--actor-out",
                           layout.checkpoint(i, "actor").string()});
  if (spec.uses_critic()) {
    const fs::path critic = critic_after(spec, layout, i - 1);
    argv.insert(argv.end(), {"--critic", critic.string(), "--critic-out", layout.checkpoint(i, "critic").string()});
    add_inputs(step, model_files(spec, layout, "critic", i - 1));
  }
  argv.insert(argv.end(), {"--seed", iteration_seed(spec, i), "--stats", layout.stats_file(i, "train").string()});
  if (spec.schedule) {
    argv.insert(argv.end(), {"--schedule", spec.schedule->string()});
    add_inputs(step, {*spec.schedule});
  }
  // Async: the samples come from the actor one step behind this one, never more.
  if (spec.async) argv.insert(argv.end(), {"--max-staleness", "1"});
  // Dynamic sampling: every round's shards, groups of equal rewards dropped, the first batch of the rest.
  if (dynamic_sampling(spec)) {
    argv.insert(argv.end(), {"--filter-groups", "--max-groups", std::to_string(spec.data->batch_prompts)});
    add_inputs(step, {dynamic_record(layout, i)});
  }
  append(argv, spec.train);
  // An LR decay spans the whole run: this iteration and those after it, each as long.
  const bool decays = std::any_of(spec.train.begin(), spec.train.end(), [](const auto& f) {
    return f.first == "--lr-schedule" && f.second != "constant";
  });
  if (decays) argv.insert(argv.end(), {"--lr-calls", std::to_string(spec.iterations - i + 1)});
  append_tp(argv, spec.train_tp);
  append_common(argv, spec, opt);
  step.pipeline.push_back(Command{.stage = "train", .argv = std::move(argv), .shards_from = layout.scored_dir(i),
                                  .shards_pattern = "scored-*.h5", .shards_at = shards_at});
  return step;
}

bool evaluates(const RunSpec& spec, int iteration) {
  if (!spec.eval) return false;
  return iteration == 0 || iteration % spec.eval->every == 0 || iteration == spec.iterations;
}

Step eval_step(const RunSpec& spec, const Layout& layout, const PlanOptions& opt, int i) {
  const EvalSpec& ev = *spec.eval;
  const fs::path out = layout.eval_file(i);
  const fs::path prompts = ev.heldout_split ? layout.data_file("heldout") : fs::path(ev.policy.prompts);
  Step step{.name = fmt::format("iteration {} eval", i), .pipeline = {}, .inputs = {prompts}, .outputs = {out},
            .stale = {out}};
  add_inputs(step, model_files(spec, layout, "actor", i));
  // The section's settings as braid eval's flags (its schema names both), then the run's own.
  EvalSpec settings = ev;
  settings.policy.prompts = prompts.string();
  Argv argv = {opt.tools.braid, "eval", actor_after(spec, layout, i).string()};
  for (auto& word : cli::keyed_argv(eval_section_schema(), settings)) argv.push_back(std::move(word));
  if (!ev.policy.reward_cmd.empty()) argv.insert(argv.end(), {"--reward-cmd-dir", ev.policy.reward_cmd_dir});
  argv.insert(argv.end(), {"--seed", iteration_seed(spec, i), "--tokenizer", spec.tokenizer});
  append_chat(argv, step, spec);
  argv.insert(argv.end(), {"-o", out.string()});
  append_common(argv, spec, opt);
  step.pipeline.push_back(Command{.stage = "eval", .argv = std::move(argv)});
  return step;
}

std::vector<std::vector<Step>> step_groups(const RunSpec& spec, const Layout& layout, const PlanOptions& opt) {
  std::vector<std::vector<Step>> groups;
  if (!spec.async) {
    for (int i = 1; i <= spec.iterations; ++i) {
      groups.push_back({rollout_step(spec, layout, opt, i)});
      groups.push_back({train_step(spec, layout, opt, i)});
      if (evaluates(spec, i)) groups.push_back({eval_step(spec, layout, opt, i)});
    }
    return groups;
  }
  groups.push_back({rollout_step(spec, layout, opt, 1)});
  for (int i = 1; i <= spec.iterations; ++i) {
    std::vector<Step> g{train_step(spec, layout, opt, i)};
    if (i < spec.iterations) g.push_back(rollout_step(spec, layout, opt, i + 1));
    groups.push_back(std::move(g));
    if (evaluates(spec, i)) groups.push_back({eval_step(spec, layout, opt, i)});
  }
  return groups;
}

}  // namespace braid::driver
