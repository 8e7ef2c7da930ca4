#include "driver/run_plan.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "driver/layout.hpp"
#include "driver/prediction.hpp"
#include "driver/run_file.hpp"
#include "io/weight_shard.hpp"
#include "plan/experiment.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

// The value of a stage flag the run file sets ("--mini-batch" -> "64"), if any.
std::optional<std::string> flag_value(const ToolFlags& flags, std::string_view flag) {
  for (const auto& [f, v] : flags) {
    if (f == flag) return v;
  }
  return std::nullopt;
}

// The plan's calls, each checked: a name, a mesh and a strategy of positive integers.
std::vector<PlannedCall> read_calls(Checker& c, const json& plan, const std::string& file) {
  std::vector<PlannedCall> calls;
  if (!plan.contains("calls") || !plan["calls"].is_array()) {
    c.fail("plan", file + ": calls: missing or not a list (is it braid-meshplan's output?)");
    return calls;
  }
  int index = 0;
  for (const auto& item : plan["calls"]) {
    const std::string at = fmt::format("{}: calls[{}]", file, index++);
    PlannedCall pc;
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
      c.fail("plan", at + ".name: missing");
      continue;
    }
    pc.name = item["name"].get<std::string>();
    auto positive = [&](const json& obj, const char* where, const char* key, int& out) {
      if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer() || obj[key].get<std::int64_t>() < 1 ||
          obj[key].get<std::int64_t>() > 1 << 20) {
        c.fail("plan", fmt::format("{}.{}.{}: missing or not a positive count", at, where, key));
        return;
      }
      out = obj[key].get<int>();
    };
    const json& st = item.contains("strategy") ? item["strategy"] : json();
    positive(st, "strategy", "dp", pc.dp);
    positive(st, "strategy", "tp", pc.tp);
    positive(st, "strategy", "pp", pc.pp);
    positive(st, "strategy", "micro_batches", pc.micro_batches);
    if (st.is_object() && st.contains("recompute")) {
      if (!st["recompute"].is_number_integer() || st["recompute"].get<std::int64_t>() < 0 ||
          st["recompute"].get<std::int64_t>() > 1 << 20) {
        c.fail("plan", fmt::format("{}.strategy.recompute: not a count >= 0", at));
      } else {
        pc.recompute = st["recompute"].get<int>();
      }
    }
    const json& mesh = item.contains("mesh") ? item["mesh"] : json();
    positive(mesh, "mesh", "devices", pc.devices);
    if (mesh.is_object() && mesh.contains("first_device") && mesh["first_device"].is_number_integer()) {
      pc.first_device = mesh["first_device"].get<int>();
    }
    if (mesh.is_object() && mesh.contains("where") && mesh["where"].is_string()) pc.where = mesh["where"].get<std::string>();
    if (item.contains("time_s") && item["time_s"].is_number()) pc.time_s = item["time_s"].get<double>();
    if (pc.dp * pc.tp * pc.pp != pc.devices) {
      c.fail("plan", fmt::format("{}: dp {} x tp {} x pp {} is not the mesh's {} devices", at, pc.dp, pc.tp, pc.pp,
                                 pc.devices));
    }
    calls.push_back(std::move(pc));
  }
  return calls;
}

// The experiment a plan was made for: given in the run file, else the plan's
// inputs.experiment, found as it is, beside the plan, or from the current folder.
std::optional<fs::path> find_experiment(const json& plan, const fs::path& plan_file) {
  if (!plan.contains("inputs") || !plan["inputs"].is_object() || !plan["inputs"].contains("experiment") ||
      !plan["inputs"]["experiment"].is_string()) {
    return std::nullopt;
  }
  const fs::path p(plan["inputs"]["experiment"].get<std::string>());
  std::error_code ec;
  if (p.is_absolute()) return fs::is_regular_file(p, ec) ? std::optional(p) : std::nullopt;
  for (const fs::path& base : {plan_file.parent_path(), fs::path(".")}) {
    const fs::path candidate = (base.empty() ? p : base / p).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

// The cluster and profile a plan was made from, for the run's prediction: the request's,
// else the plan's inputs (found as they are, beside the plan, or from the current folder;
// "analytic:NAME" is an analytic profile of hardware NAME).
void find_inputs(const json& plan, RunPlan& rp) {
  if (rp.request) {
    rp.cluster = rp.request->cluster;
    rp.profile = rp.request->profile;
    rp.hardware = rp.request->hardware;
    return;
  }
  const json inputs = plan.contains("inputs") && plan["inputs"].is_object() ? plan["inputs"] : json::object();
  auto find = [&](const char* key) -> std::optional<fs::path> {
    if (!inputs.contains(key) || !inputs[key].is_string()) return std::nullopt;
    const fs::path p(inputs[key].get<std::string>());
    std::error_code ec;
    if (p.is_absolute()) return fs::is_regular_file(p, ec) ? std::optional(p) : std::nullopt;
    for (const fs::path& base : {rp.file.parent_path(), fs::path(".")}) {
      const fs::path candidate = (base.empty() ? p : base / p).lexically_normal();
      if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    return std::nullopt;
  };
  rp.cluster = find("cluster");
  rp.profile = find("profile");
  const std::string named = inputs.value("profile", std::string());
  if (!rp.profile && named.rfind("analytic:", 0) == 0) rp.hardware = named.substr(9);
}

// Samples of one iteration as the run generates them: prompt lines (the first
// generate.limit) times generate.samples_per_prompt (braid-generate's default 1).
std::int64_t run_samples(const RunSpec& spec, std::int64_t* prompts_out) {
  std::int64_t limit = 0;
  if (auto v = flag_value(spec.generate, "--limit")) limit = std::stoll(*v);
  std::int64_t prompts = 0;
  for_each_jsonl_line(read_text_file(spec.prompts.string()), limit, [&](std::int64_t, std::string_view) { ++prompts; });
  if (spec.data && spec.data->batch_prompts > 0) prompts = spec.data->batch_prompts;  // the data section's batch
  *prompts_out = prompts;
  const std::int64_t per = std::stoll(flag_value(spec.generate, "--samples-per-prompt").value_or("1"));
  return prompts * per;
}

// A model's shape as the planner reads it: from its init block's config, or from the
// config a checkpoint records.
std::optional<plan::ModelShape> run_shape(const ModelSource& src, bool value_head, std::string* problem) {
  json cfg;
  try {
    if (src.kind == ModelSource::Kind::init) {
      cfg = load_json_file(src.path.string());
    } else if (src.kind == ModelSource::Kind::checkpoint) {
      const auto files = checkpoint_files_of(src.path);
      if (files.empty()) return std::nullopt;  // reported by the models section
      const io::WeightShardReader shard(files.front());
      if (shard.meta().model_config.empty()) {
        *problem = files.front().string() + " records no model config";
        return std::nullopt;
      }
      cfg = json::parse(shard.meta().model_config);
    } else {
      return std::nullopt;
    }
  } catch (const std::exception& e) {
    *problem = e.what();
    return std::nullopt;
  }
  Checker local(src.path.string());
  plan::ModelShape shape = plan::shape_from_hf_config(cfg, local, "");
  if (!local.ok()) {
    *problem = fmt::format("{}: {}", src.path.string(), local.problems().front());
    return std::nullopt;
  }
  shape.value_head = value_head;
  return shape;
}

std::string shape_text(const plan::ModelShape& s) {
  return fmt::format("{} layers, hidden {}, intermediate {}, {} heads ({} kv), vocabulary {}", s.layers, s.hidden,
                     s.intermediate, s.heads, s.kv_heads, s.vocab);
}

// Every difference between the run and the experiment the plan was made for.
void check_experiment(Checker& c, const RunSpec& spec, const plan::Experiment& e, const std::string& file) {
  // An experiment's grpo stands for every algorithm without a critic (the same calls).
  const std::string algorithm = e.algorithm == plan::Algorithm::ppo ? "ppo" : "grpo";
  if ((e.algorithm == plan::Algorithm::ppo) != spec.uses_critic()) {
    c.fail("plan", fmt::format("{}: algorithm: is {}, but the run's is {}", file, algorithm, spec.algorithm));
  }
  struct Role {
    const char* role;
    const ModelSource* src;
    bool value_head;
  };
  const ModelSource* ref = spec.ref.kind == ModelSource::Kind::initial_actor ? &spec.actor : &spec.ref;
  std::vector<Role> roles = {{"actor", &spec.actor, false}, {"ref", ref, false}, {"reward", &spec.reward, true}};
  if (spec.uses_critic()) roles.push_back({"critic", &spec.critic, true});
  for (const auto& r : roles) {
    const plan::ExperimentModel* planned = e.model(r.role);
    std::string problem;
    const auto shape = run_shape(*r.src, r.value_head, &problem);
    if (!problem.empty()) {
      c.fail("plan", fmt::format("cannot read the run's {} model to check it against {}: {}", r.role, file, problem));
      continue;
    }
    if (!shape || planned == nullptr) continue;  // a rule or command reward; a role the experiment lacks
    if (!shape->same_as(planned->shape)) {
      c.fail("plan", fmt::format("{}: models.{}.config: the plan is for a model of {}, but the run's {} has {}", file,
                                 r.role, shape_text(planned->shape), r.role, shape_text(*shape)));
    }
  }
  std::int64_t prompts = 0;
  std::int64_t samples = 0;
  try {
    samples = run_samples(spec, &prompts);
  } catch (const std::exception&) {
    return;  // the prompts are reported by their own field
  }
  if (samples != e.global_batch) {
    c.fail("plan", fmt::format("{}: batch.global: is {}, but the run generates {} samples an iteration ({} prompts x "
                               "generate.samples_per_prompt {})",
                               file, e.global_batch, samples, prompts, samples / std::max<std::int64_t>(1, prompts)));
  }
  const std::int64_t mini = std::stoll(flag_value(spec.train, "--mini-batch").value_or("0"));
  const std::int64_t run_mini = mini > 0 ? mini : samples;
  if (run_mini != e.mini_batch) {
    c.fail("plan", fmt::format("{}: batch.mini: is {}, but the run's mini-batch is {} (train.mini_batch{})", file,
                               e.mini_batch, run_mini, mini > 0 ? "" : " absent: the whole iteration"));
  }
  const std::int64_t lora_rank = std::stoll(flag_value(spec.train, "--lora-rank").value_or("0"));
  if (lora_rank != e.train.lora_rank) {
    c.fail("plan", fmt::format("{}: train.lora_rank: is {}, but the run's is {} (train.lora_rank)", file,
                               e.train.lora_rank, lora_rank));
  }
  const std::int64_t epochs = std::stoll(flag_value(spec.train, "--epochs").value_or("1"));
  if (epochs != e.ppo_epochs) {
    c.fail("plan", fmt::format("{}: ppo_epochs: is {}, but the run trains {} epoch(s) (train.epochs)", file,
                               e.ppo_epochs, epochs));
  }
}

// The devices of a set of calls (their meshes may differ), the largest tp among them,
// and each one's sequences per micro-batch: what one process group running them all needs.
struct Union {
  int devices = 0;
  int tp = 1;
  bool differ = false;   // not every call has the same mesh and strategy
  bool pipelined = false;
  std::int64_t min_sequences = 0;  // the smallest planned micro-batch, in sequences
};

Union union_of(const std::vector<const PlannedCall*>& calls, std::int64_t batch) {
  Union u;
  std::set<int> devices;
  for (const PlannedCall* pc : calls) {
    for (int d = pc->first_device; d < pc->first_device + pc->devices; ++d) devices.insert(d);
    u.tp = std::max(u.tp, pc->tp);
    u.pipelined = u.pipelined || pc->pp > 1;
    const PlannedCall& first = *calls.front();
    if (pc->first_device != first.first_device || pc->devices != first.devices || pc->dp != first.dp ||
        pc->tp != first.tp || pc->pp != first.pp) {
      u.differ = true;
    }
    // pp folds into dp (the tools' ranks hold whole models or tp slices): a replica's share
    // of the batch over its micro-batches.
    const std::int64_t seqs = std::max<std::int64_t>(1, ceil_div(ceil_div(batch, pc->dp * pc->pp), pc->micro_batches));
    u.min_sequences = u.min_sequences == 0 ? seqs : std::min(u.min_sequences, seqs);
  }
  u.devices = static_cast<int>(devices.size());
  return u;
}

std::string names_of(const std::vector<const PlannedCall*>& calls) {
  std::vector<std::string> names;
  for (const auto* pc : calls) names.push_back(pc->name);
  return fmt::format("{}", fmt::join(names, "+"));
}

// A flag the plan gives a stage tool, unless the run file sets it (then the run file's wins).
void plan_flag(ToolFlags& flags, const std::string& flag, std::int64_t value, const std::string& key, RunPlan& plan) {
  if (auto given = flag_value(flags, flag)) {
    if (*given != std::to_string(value)) {
      plan.conflicts.push_back(fmt::format("{} {} (the run file's) wins over the plan's {} {}", key, *given, flag, value));
    }
    return;
  }
  flags.emplace_back(flag, std::to_string(value));
}

}  // namespace

std::string PlannedCall::layout() const {
  return fmt::format("d{}t{}p{} x{}{}", dp, tp, pp, micro_batches, where.empty() ? "" : " on " + where);
}

const PlannedCall* RunPlan::call(std::string_view name) const {
  for (const auto& c : calls) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<std::string> RunPlan::summary() const {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("# plan {}: predicted iteration {:.3f} s (serial {:.3f} s){}{}", file.string(), iteration_s,
                              serial_s, inter_used ? fmt::format("; R_t {} m {}", r_t_fraction, m) : "",
                              intra_used ? fmt::format("; training fused ({} group(s))", groups) : ""));
  auto stage = [&](const char* tool, const StageLayout& s) {
    for (const auto& name : s.calls) {
      if (const PlannedCall* pc = call(name)) {
        lines.push_back(fmt::format("#   {:<13} planned {:<26} {:>8.3f} s predicted -> {} on {} rank(s){}", name,
                                    pc->layout(), pc->time_s, tool, s.ranks, s.tp > 1 ? fmt::format(", --tp {}", s.tp) : ""));
      }
    }
    for (const auto& n : s.notes) lines.push_back("#     " + n);
  };
  if (!choice_reason.empty()) lines.push_back(fmt::format("#   fusions: {} ({})", fusions_name(chosen), choice_reason));
  stage("braid-generate", generate);
  stage("braid-score", score);
  stage("braid-train", train);
  for (const auto& c : conflicts) lines.push_back("#   run file wins: " + c);
  return lines;
}

fs::path made_plan_file(const fs::path& out) { return out / "plan.json"; }
fs::path plan_schedspec_file(const fs::path& out) { return out / "plan.schedspec.json"; }
fs::path plan_schedule_file(const fs::path& out) { return out / "plan.schedule.json"; }
fs::path prediction_file(const fs::path& out) { return out / "prediction.json"; }

ordered_json record_prediction(const RunSpec& spec) {
  const RunPlan& plan = *spec.run_plan;
  std::vector<Prediction> now;
  for (const auto& p : plan.predictions) {
    // Again with the fused training's schedule, now that it is made.
    auto again = predict_iteration(variant_spec(spec, p.fusions));
    now.push_back(again ? std::move(*again) : p);
  }
  return prediction_document(now, plan.chosen, plan.choice_reason);
}

// Lays the run out on the plan's calls with the fusions `f` (each where the run can take
// it): every stage tool's ranks, tp and micro-batch flags, the rollout fused or piped, the
// training fused or data parallel; where the run differs from the plan, notes; keys the run
// file sets win (conflicts).
namespace {
void lay_out(RunSpec& spec, const plan::Experiment& experiment, Fusions f) {
  RunPlan& plan = *spec.run_plan;
  plan.generate = {};
  plan.score = {};
  plan.train = {};
  plan.conflicts.clear();
  // Sequence lengths as the planner sees them (its quantiles of the experiment's
  // distributions), for the micro-batch flags that are token budgets.
  const int n = experiment.global_batch;
  double mean = 0;
  for (int v : experiment.prompt_len.quantiles(n)) mean += v;
  for (int v : experiment.response_len.quantiles(n)) mean += v;
  mean /= std::max(1, n);
  double longest_response = experiment.response_len.upper();
  if (auto v = flag_value(spec.generate, "--max-new-tokens")) longest_response = std::max(longest_response, std::stod(*v));
  const auto longest = static_cast<std::int64_t>(std::ceil(experiment.prompt_len.upper() + longest_response + 1));
  auto tokens = [&](std::int64_t sequences) { return static_cast<std::int64_t>(std::ceil(sequences * mean)); };

  // Generation.
  const PlannedCall* gen = plan.call("actor_gen");
  if (gen == nullptr) return;  // refused by apply_plan
  StageLayout& g = plan.generate;
  g.calls = {gen->name};
  const int replicas = gen->dp * gen->pp;
  g.tp = gen->tp;
  g.ranks = replicas * g.tp;
  if (gen->pp > 1) {
    g.notes.push_back(fmt::format("actor_gen's pp {} runs as {} data-parallel replicas: braid-generate has no pipeline "
                                  "(each replica holds the whole model, or its tp slice)", gen->pp, replicas));
  }
  if (spec.sets("generate.ranks") && spec.rollout_ranks != g.ranks) {
    plan.conflicts.push_back(fmt::format("generate.ranks {} (the run file's) wins over the plan's {} ranks for actor_gen",
                                         spec.rollout_ranks, g.ranks));
    g.ranks = spec.rollout_ranks;
    if (g.ranks % g.tp != 0) {
      g.notes.push_back(fmt::format("tp {} does not divide generate.ranks {}: generation runs with tp 1", g.tp, g.ranks));
      g.tp = 1;
    }
  }
  spec.rollout_ranks = g.ranks;
  spec.rollout_tp = g.tp;
  const int gen_replicas = g.ranks / g.tp;
  g.max_batch = std::max<std::int64_t>(1, ceil_div(ceil_div(n, gen_replicas), gen->micro_batches));
  plan_flag(spec.generate, "--max-batch", g.max_batch, "generate.max_batch", plan);
  if (f.inter && plan.inter_used && gen_replicas > 1) {
    const int m = std::min(std::max(1, plan.m), gen_replicas - 1);
    std::string text = fmt::format("{}", plan.r_t_fraction);
    if (text.find_first_of(".eE") == std::string::npos) text += ".0";
    if (spec.sets("generate.migrate_threshold")) {
      if (spec.migrate_threshold != text) {
        plan.conflicts.push_back(fmt::format("generate.migrate_threshold {} (the run file's) wins over the plan's R_t {}",
                                             spec.migrate_threshold.value_or("?"), text));
      }
    } else if (plan.r_t_fraction > 0 && plan.r_t_fraction <= 1) {
      spec.migrate_threshold = text;
      if (!spec.sets("generate.migrate_to")) spec.migrate_to = m;
    }
    if (m != plan.m) g.notes.push_back(fmt::format("m {} runs as {} (below the {} replicas)", plan.m, m, gen_replicas));
  }
  // Inference runs on the ranks generation frees when the plan fuses the two, else on its own.
  // The fused rollout runs at tp 1 only (lib/fuse): at tp > 1 generation is followed by
  // braid-score, the migration kept.
  const bool fuse = f.inter && gen_replicas > 1 && g.tp == 1;
  if (f.inter && gen_replicas > 1 && g.tp > 1 && !spec.sets("generate.fuse")) {
    g.notes.push_back(fmt::format("generation and inference fused, but the fused rollout runs at tp 1 only: "
                                  "generation at tp {}{}, then braid-score", g.tp, spec.migrate_threshold ? " with its migration" : ""));
  }
  if (spec.sets("generate.fuse")) {
    if (spec.fuse != fuse) {
      plan.conflicts.push_back(fmt::format("generate.fuse {} (the run file's) wins over the plan's inter-stage fusion ({})",
                                           spec.fuse, plan.inter_used ? "used" : "not used"));
    }
  } else {
    spec.fuse = fuse;
  }

  // Inference: one braid-score for every model scored.
  std::vector<const PlannedCall*> inf;
  for (const char* name : {"ref_inf", "critic_inf", "reward_inf"}) {
    const PlannedCall* pc = plan.call(name);
    if (pc == nullptr) continue;
    if (std::string_view(name) == "critic_inf" && !spec.uses_critic()) continue;
    if (std::string_view(name) == "reward_inf" && spec.reward.kind != ModelSource::Kind::checkpoint &&
        spec.reward.kind != ModelSource::Kind::init) {
      plan.score.notes.push_back(fmt::format("reward_inf ({}) is not run as planned: the run's reward is a {}, computed "
                                             "inside braid-score",
                                             pc->layout(), spec.reward.kind == ModelSource::Kind::rule ? "rule" : "command"));
      continue;
    }
    inf.push_back(pc);
  }
  StageLayout& s = plan.score;
  if (!inf.empty()) {
    const Union u = union_of(inf, n);
    for (const auto* pc : inf) s.calls.push_back(pc->name);
    s.tp = u.tp;
    s.ranks = u.devices - u.devices % u.tp;
    if (u.differ) {
      s.notes.push_back(fmt::format(
          "{} run as one braid-score on the union of their devices ({} ranks, tp {}: the largest): every rank of "
          "braid-score holds each model it scores, and a scored shard needs all of their outputs at once",
          names_of(inf), s.ranks, s.tp));
    }
    if (u.pipelined) s.notes.push_back("pp > 1 runs as data-parallel replicas: braid-score has no pipeline");
    s.micro_tokens = tokens(u.min_sequences);
    plan_flag(spec.score, "--micro-tokens", s.micro_tokens, "score.micro_tokens", plan);
  }
  if (spec.fuse) {
    s.notes.push_back(fmt::format("scored inside the fused rollout, on actor_gen's {} rank(s) (inter-stage fusion: "
                                  "the ranks generation frees score)", g.ranks));
    s.ranks = g.ranks;
    s.tp = g.tp;
    spec.score_ranks = 1;
    spec.score_tp = 1;
  } else {
    spec.score_ranks = s.ranks;
    spec.score_tp = s.tp;
  }

  // Training.
  StageLayout& t = plan.train;
  std::vector<const PlannedCall*> train;
  for (const char* name : {"actor_train", "critic_train"}) {
    const PlannedCall* pc = plan.call(name);
    if (pc != nullptr && (std::string_view(name) == "actor_train" || spec.uses_critic())) train.push_back(pc);
  }
  for (const auto* pc : train) t.calls.push_back(pc->name);
  if (!f.intra) {
    // Unfused: whatever fused schedule there was (the run file's or the plan's) is left out.
    spec.schedule.reset();
    spec.plan_schedule = false;
    spec.actor_stages = 1;
    spec.critic_stages = 1;
  }
  if (spec.schedule) {
    if (plan.intra_used) plan.conflicts.push_back("train.schedule (the run file's) wins over the plan's fused training");
    if (!plan.intra_used) plan.conflicts.push_back("train.schedule (the run file's) fuses the training the plan does not");
    t.ranks = spec.ranks;
    t.notes.push_back("the run file's train.schedule, on its " + std::to_string(spec.ranks) + " ranks");
  } else if (f.intra && plan.schedspec.is_object() && spec.uses_critic()) {
    int tp = 1;
    for (const auto& m : plan.schedspec["models"]) tp = std::max(tp, m.value("tp", 1));
    for (const auto& m : plan.schedspec["models"]) {
      if (m.value("tp", 1) != tp) {
        t.notes.push_back(fmt::format("{} trains with tp {} instead of {}: braid-train has one --tp for both models "
                                      "(the schedule merges its stages as the plan's does)",
                                      m.value("name", std::string("?")), tp, m.value("tp", 1)));
      }
    }
    t.tp = tp;
    t.ranks = plan.schedspec.value("devices", 1) * plan.groups * tp;
    if (plan.groups > 1) {
      t.notes.push_back(fmt::format("the plan's {} identical fused groups: one group's schedule, run {} times side by "
                                    "side on {} devices (data parallel between the groups)",
                                    plan.groups, plan.groups, t.ranks / tp));
    }
    t.notes.push_back("the fused actor+critic pipeline: braid-train --schedule (braid-schedgen of the plan's schedspec); "
                      "its micro-batches are the schedule's");
    // Each stage's activation slots are sized for --micro-tokens: the schedule's largest
    // micro-batch (of the model cut into the fewest: replicas x groups x micro-batches) of
    // the longest sequences, not braid-train's default budget.
    int parts = 0;
    for (const auto& m : plan.schedspec["models"]) {
      const int mine = std::max(1, m.value("replicas", 1) * plan.groups * m.value("micro_batches", 1));
      parts = parts == 0 ? mine : std::min(parts, mine);
    }
    const std::int64_t mini = std::stoll(flag_value(spec.train, "--mini-batch").value_or("0"));
    t.micro_tokens = ceil_div(mini > 0 ? mini : n, parts) * longest;
    plan_flag(spec.train, "--micro-tokens", t.micro_tokens, "train.micro_tokens", plan);
    spec.ranks = t.ranks;
    spec.train_tp = tp;
    spec.plan_schedule = true;
  } else if (!train.empty()) {
    const std::int64_t mini = std::stoll(flag_value(spec.train, "--mini-batch").value_or("0"));
    const Union u = union_of(train, mini > 0 ? mini : n);
    t.tp = u.tp;
    t.ranks = u.devices - u.devices % u.tp;
    if (u.differ) {
      t.notes.push_back(fmt::format(
          "{} run as one braid-train on the union of their devices ({} ranks, tp {}: the largest): braid-train {} "
          "trains both models in one process group",
          names_of(train), t.ranks, t.tp, spec.algorithm));
    }
    if (u.pipelined) {
      t.notes.push_back("pp > 1 runs as data-parallel replicas: braid-train has a pipeline only with a schedule, which "
                        "the plan does not fuse");
    }
    t.micro_tokens = std::max(tokens(u.min_sequences), longest);
    if (tokens(u.min_sequences) < longest) {
      t.notes.push_back(fmt::format("--micro-tokens {} is the longest sequence (the planned micro-batch of {} "
                                    "sequence(s) is {} tokens): braid-train refuses a sequence longer than its budget",
                                    longest, u.min_sequences, tokens(u.min_sequences)));
    }
    plan_flag(spec.train, "--micro-tokens", t.micro_tokens, "train.micro_tokens", plan);
    spec.ranks = t.ranks;
    spec.train_tp = t.tp;
  }
  // Recomputation where the plan has a training call recompute (one --recompute for both models:
  // the most recomputing, every layer before every k-th).
  int recompute = 0;
  for (const auto* pc : train) {
    if (pc->recompute > 0) recompute = recompute == 0 ? pc->recompute : std::min(recompute, pc->recompute);
  }
  if (recompute > 0) {
    for (const auto* pc : train) {
      if (pc->recompute != recompute) {
        t.notes.push_back(fmt::format("{} recomputes too (--recompute {}, the plan's {}): braid-train has one "
                                      "--recompute for both models", pc->name, recompute, pc->recompute));
      }
    }
    plan_flag(spec.train, "--recompute", recompute, "train.recompute", plan);
  }
  plan.applied = true;
}

// The fusions to run: each as the run file fixes it; the others as the prediction says
// (the fastest whole iteration of every way the run can take), or as the plan has them
// when nothing can be predicted (a plan without a profile braid can read).
void choose_and_lay_out(RunSpec& spec) {
  const auto base = std::make_shared<const RunSpec>(spec);
  const RunPlan& bp = *base->run_plan;
  const plan::Experiment& e = *bp.experiment_doc;
  const std::vector<bool> inter = spec.sets("generate.fuse") ? std::vector<bool>{spec.fuse} : std::vector<bool>{false, true};
  std::vector<bool> intra{false};
  if (spec.schedule) intra = {true};
  else if (spec.train_fuse) intra = {*spec.train_fuse};
  else if (bp.schedspec.is_object() && spec.uses_critic()) intra = {false, true};
  std::vector<Prediction> predictions;
  std::vector<Fusions> possible;
  std::string why;
  bool predicted = true;
  for (bool a : inter) {
    for (bool b : intra) {
      RunSpec s = *base;
      lay_out(s, e, {a, b});
      const Fusions f = fusions_of(s);
      if (!(f == Fusions{a, b})) continue;  // not a way this run can take (one rank, tp > 1, GRPO ...)
      possible.push_back(f);
      if (!predicted) continue;
      if (auto p = predict_iteration(s, &why)) {
        predictions.push_back(std::move(*p));
      } else {
        predicted = false;
      }
    }
  }
  Fusions choice{bp.inter_used, bp.intra_used};
  std::string reason;
  if (predicted && !predictions.empty()) {
    choice = choose_fusions(predictions, &reason);
    std::vector<std::string> fixed;
    if (inter.size() == 1) fixed.emplace_back("generate.fuse");
    if (spec.schedule) fixed.emplace_back("train.schedule");
    if (spec.train_fuse) fixed.emplace_back("train.fuse");
    if (!fixed.empty()) reason += fmt::format(" (the run file fixes {})", fmt::join(fixed, " and "));
  } else {
    predictions.clear();
    if (std::find(possible.begin(), possible.end(), choice) == possible.end() && !possible.empty()) choice = possible.front();
    reason = fmt::format("the plan's fusions ({}); nothing predicted: {}", fusions_name(choice),
                         why.empty() ? "no way to run" : why);
  }
  spec = *base;
  lay_out(spec, e, choice);
  RunPlan& plan = *spec.run_plan;
  plan.base = base;
  plan.chosen = choice;
  plan.choice_reason = reason;
  plan.predictions = std::move(predictions);
}

}  // namespace

RunSpec variant_spec(const RunSpec& spec, Fusions f) {
  const RunPlan& plan = *spec.run_plan;
  RunSpec s = *plan.base;
  lay_out(s, *plan.experiment_doc, f);
  RunPlan& sp = *s.run_plan;
  sp.base = plan.base;
  sp.chosen = f;
  sp.schedule_file = plan.schedule_file;
  if (s.plan_schedule && plan.schedule_file) use_plan_schedule(s, *plan.schedule_file);
  return s;
}

void apply_plan(Checker& c, RunSpec& spec) {
  RunPlan& plan = *spec.run_plan;
  const std::string file = plan.file.string();
  json doc;
  try {
    doc = load_json_file(file);
  } catch (const std::exception& e) {
    c.fail("plan", e.what());
    return;
  }
  if (!doc.is_object() || doc.value("format", "") != "braid.plan") {
    c.fail("plan", file + " is not a braid.plan (braid-meshplan's output)");
    return;
  }
  const std::size_t before = c.problems().size();
  plan.calls = read_calls(c, doc, file);
  const json predicted = doc.contains("predicted") && doc["predicted"].is_object() ? doc["predicted"] : json::object();
  plan.iteration_s = predicted.value("iteration_s", 0.0);
  plan.serial_s = predicted.value("serial_s", 0.0);
  if (doc.contains("memory") && doc["memory"].is_object() && doc["memory"].value("oom", false)) {
    c.fail("plan", file + ": memory.oom: the plan does not fit in the cluster's memory (braid-meshplan exit 3)");
  }
  const json fusion = doc.contains("fusion") && doc["fusion"].is_object() ? doc["fusion"] : json::object();
  const json inter = fusion.contains("inter_stage") && fusion["inter_stage"].is_object() ? fusion["inter_stage"] : json::object();
  const json intra = fusion.contains("intra_stage") && fusion["intra_stage"].is_object() ? fusion["intra_stage"] : json::object();
  plan.inter_used = inter.value("used", false);
  plan.r_t_fraction = inter.value("r_t_fraction", 0.0);
  plan.m = inter.value("m", 0);
  // The fused training's schedspec is there whenever actor and critic train on one mesh with
  // micro-batches that fit one pipeline, fused by the plan or not: a prediction may fuse it.
  const bool has_schedspec = intra.contains("schedspec") && intra["schedspec"].is_object();
  plan.intra_used = intra.value("used", false) && has_schedspec;
  plan.groups = std::max(1, intra.value("groups", 1));
  if (has_schedspec) plan.schedspec = intra["schedspec"];
  find_inputs(doc, plan);

  // The experiment it was made for: the same run, or refused.
  if (!plan.experiment) plan.experiment = find_experiment(doc, plan.file);
  std::optional<plan::Experiment> experiment;
  if (!plan.experiment) {
    c.fail("plan", fmt::format("{}: inputs.experiment: {}; name the braid.experiment it was made for: "
                               "\"plan\": {{\"file\": ..., \"experiment\": ...}}",
                               file,
                               doc.contains("inputs") && doc["inputs"].is_object() && doc["inputs"].contains("experiment")
                                   ? "not found beside the plan or in the current folder"
                                   : "missing"));
  } else {
    try {
      experiment = plan::load_experiment(plan.experiment->string());
      check_experiment(c, spec, *experiment, plan.experiment->string());
    } catch (const InputError& e) {
      c.fail("plan", e.what());
    }
  }
  if (c.problems().size() > before || !experiment) return;

  if (plan.call("actor_gen") == nullptr) {
    c.fail("plan", file + ": calls: no actor_gen call");
    return;
  }
  plan.experiment_doc = std::make_shared<const plan::Experiment>(*experiment);
  choose_and_lay_out(spec);
  if (spec.train_fuse.value_or(false) && !spec.plan_schedule) {
    c.fail("train.fuse", fmt::format("{}: fusion.intra_stage has no schedspec: the plan's actor and critic training "
                                     "cannot run as one pipeline (different meshes, or micro-batches of different sizes)",
                                     file));
  }
}

}  // namespace braid::driver
