#include "driver/run_file.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backend/registry.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/option_schema.hpp"
#include "data/fields.hpp"
#include "driver/layout.hpp"
#include "eval/option_schema.hpp"
#include "generate/option_schema.hpp"
#include "plan/hardware.hpp"
#include "rl/algorithms.hpp"
#include "score/command.hpp"
#include "score/options.hpp"
#include "score/text_reward.hpp"
#include "train/option_schema.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

using cli::kMaxCount;

// The stage tools' options the run file may set: those of their schemas with a key
// (lib/generate/option_schema.cpp, lib/score/options.cpp, lib/train/option_schema.cpp).
std::vector<cli::OptionSpec> keyed(const std::vector<cli::OptionSpec>& specs) {
  std::vector<cli::OptionSpec> out;
  for (const auto& s : specs) {
    if (!s.key.empty()) out.push_back(s);
  }
  return out;
}
const std::vector<cli::OptionSpec>& generate_settings() {
  static const auto s = keyed(cli::specs_of(gen::generate_schema()));
  return s;
}
const std::vector<cli::OptionSpec>& score_settings() {
  static const auto s = keyed(cli::specs_of(score::score_schema()));
  return s;
}

std::vector<std::string> keys_of(const std::vector<cli::OptionSpec>& settings, std::vector<std::string> extra = {}) {
  for (const auto& s : settings) extra.push_back(s.key);
  return extra;
}

// Reads the settings present in obj (the others keep the tool's default), checked by their
// schema's type, bounds and choices, as the flags that set them; a boolean is its flag
// (true) or its negation (false).
ToolFlags read_settings(Checker& c, const json& obj, const std::string& where, const std::vector<cli::OptionSpec>& settings) {
  ToolFlags flags;
  if (!obj.is_object()) return flags;
  for (const auto& s : settings) {
    if (!obj.contains(s.key)) continue;
    const auto v = cli::checked_setting(c, obj, where, s, s.run_file_bounds.value_or(s.bounds));
    if (!v) continue;
    if (v->is_boolean()) {
      flags.emplace_back(v->get<bool>() ? s.name() : s.negation, "");
    } else {
      flags.emplace_back(s.name(), cli::flag_value(*v));
    }
  }
  return flags;
}

// A path of the run file, taken relative to the run file's folder.
fs::path resolve(const fs::path& dir, const std::string& p) {
  const fs::path path(p);
  return (path.is_absolute() ? path : dir / path).lexically_normal();
}

// braid-score's --reward-rule grammar, checked by braid-score's own parser.
std::optional<std::string> rule_problem(const std::string& rule) {
  try {
    score::make_rule_reward(rule);
  } catch (const InputError& e) {
    return e.problems().empty() ? std::string(e.what()) : e.problems().front();
  }
  return std::nullopt;
}

struct ModelRules {
  bool rule_allowed = false;
};

ModelSource read_model(Checker& c, const json& models, const std::string& key, const fs::path& dir,
                       ModelRules rules) {
  ModelSource src;
  const std::string field = Checker::path("models", key);
  const json& v = models.at(key);
  auto checkpoint = [&](const std::string& spec, const std::string& at) {
    src.kind = ModelSource::Kind::checkpoint;
    src.path = resolve(dir, spec);
    if (!checkpoint_present(src.path)) {
      c.fail(at, fmt::format("no checkpoint {} (neither the file nor its stage files)", src.path.string()));
    }
  };
  if (v.is_string()) {
    checkpoint(v.get<std::string>(), field);
    return src;
  }
  if (!v.is_object()) {
    c.fail(field, rules.rule_allowed ? "expected a checkpoint path or an object with \"init\", \"rule\" or \"command\""
                                     : "expected a checkpoint path or an object with \"init\"");
    return src;
  }
  std::vector<std::string> known = {"checkpoint", "init"};
  if (rules.rule_allowed) known.insert(known.end(), {"rule", "command"});
  std::vector<std::string> keys = known;
  if (rules.rule_allowed) keys.emplace_back("timeout");
  c.no_unknown_keys(v, field, keys);
  if (v.contains("timeout") && !v.contains("command")) c.fail(Checker::path(field, "timeout"), "only with \"command\"");
  int given = 0;
  for (const auto& k : known) given += v.contains(k) ? 1 : 0;
  if (given != 1) {
    c.fail(field, fmt::format("give exactly one of: {}", fmt::join(known, ", ")));
    return src;
  }
  if (v.contains("checkpoint")) {
    if (auto s = c.string(v, field, "checkpoint")) checkpoint(*s, Checker::path(field, "checkpoint"));
  } else if (v.contains("init")) {
    src.kind = ModelSource::Kind::init;
    const std::string at = Checker::path(field, "init");
    const json& init = c.object(v, field, "init");
    c.no_unknown_keys(init, at, {"config", "seed"});
    if (auto cfg = c.string(init, at, "config")) {
      src.path = resolve(dir, *cfg);
      if (!fs::is_regular_file(src.path)) c.fail(Checker::path(at, "config"), "no file " + src.path.string());
    }
    src.seed = static_cast<std::uint64_t>(c.integer(init, at, "seed", {.min = 0}, 0).value_or(0));
  } else if (v.contains("rule")) {
    if (auto rule = c.string(v, field, "rule")) {
      src.kind = ModelSource::Kind::rule;
      src.rule = *rule;
      if (auto problem = rule_problem(*rule)) c.fail(Checker::path(field, "rule"), *problem);
    }
  } else if (auto command = c.string(v, field, "command")) {
    src.kind = ModelSource::Kind::command;
    src.command = *command;
    src.command_dir = dir;
    if (command->find_first_not_of(" \t") == std::string::npos) {
      c.fail(Checker::path(field, "command"), "is empty: give the scorer's command line");
    }
    if (v.contains("timeout")) {
      src.command_timeout = c.number(v, field, "timeout", {.min = 0, .max = 86400, .exclusive_min = true});
    }
  }
  return src;
}

void read_models(Checker& c, const json& doc, const fs::path& dir, RunSpec& spec) {
  const json& models = c.object(doc, "", "models");
  if (!doc.contains("models") || !doc["models"].is_object()) return;  // already reported
  c.no_unknown_keys(models, "models", {"actor", "critic", "ref", "reward"});
  auto present = [&](const char* k) { return models.contains(k); };
  if (present("actor")) {
    spec.actor = read_model(c, models, "actor", dir, {});
  } else {
    c.fail("models.actor", "missing (required)");
  }
  if (present("critic")) {
    if (spec.uses_critic()) {
      spec.critic = read_model(c, models, "critic", dir, {});
    } else {
      c.fail("models.critic", fmt::format("not used by {} (leave it out)", spec.algorithm));
    }
  } else if (spec.uses_critic()) {
    c.fail("models.critic", "missing (required by ppo)");
  }
  spec.ref.kind = ModelSource::Kind::initial_actor;
  if (present("ref")) spec.ref = read_model(c, models, "ref", dir, {});
  if (present("reward")) {
    spec.reward = read_model(c, models, "reward", dir, {.rule_allowed = true});
  } else {
    c.fail("models.reward", "missing (required: a checkpoint, an init block, a rule or a command)");
  }
}

// The fused pipeline runs one MPI rank per device of its schedule, and writes each
// model as the stage files of its stage count there (spec.models, by name, else
// actor first and critic second).
void read_schedule(Checker& c, const fs::path& schedule, RunSpec& spec, bool ranks_given) {
  if (!fs::is_regular_file(schedule)) {
    c.fail("train.schedule", "no file " + schedule.string());
    return;
  }
  json doc;
  try {
    doc = load_json_file(schedule.string());
  } catch (const InputError& e) {
    c.fail("train.schedule", e.what());
    return;
  }
  const json no_spec = json::object();
  const json& sched = doc.is_object() && doc.contains("spec") && doc["spec"].is_object() ? doc["spec"] : no_spec;
  if (!ranks_given) {
    const auto it = sched.find("devices");
    if (it != sched.end() && it->is_number_integer() && it->get<int>() >= 1) {
      spec.ranks = it->get<int>();
    } else {
      c.fail("train.ranks", fmt::format("missing, and {} names no spec.devices to take it from", schedule.string()));
    }
  }
  const auto models = sched.find("models");
  if (models == sched.end() || !models->is_array()) return;
  auto stages_of = [&](const std::string& name, std::size_t index) {
    const json* m = nullptr;
    for (const auto& item : *models) {
      if (item.is_object() && item.value("name", "") == name) m = &item;
    }
    if (m == nullptr && index < models->size()) m = &(*models)[index];
    if (m == nullptr || !m->contains("stages") || !(*m)["stages"].is_number_integer()) return 1;
    return std::max(1, (*m)["stages"].get<int>());
  };
  spec.actor_stages = stages_of("actor", 0);
  if (spec.uses_critic()) spec.critic_stages = stages_of("critic", 1);
}

// The prompt file as the run reads it, refused now rather than at the first iteration: each
// line through data.fields (a line without a mapped key), and under the math rule, which
// compares each response with its prompt line's "answer", a line without one.
void check_prompts_for_reward(Checker& c, const RunSpec& spec) {
  const bool math = spec.reward.kind == ModelSource::Kind::rule && spec.reward.rule == "math";
  if (!math && !(spec.data && !spec.data->fields.empty())) return;
  if (spec.prompts.empty() || !fs::is_regular_file(spec.prompts)) return;  // reported already
  std::int64_t limit = 0;
  for (const auto& [flag, value] : spec.generate) {
    if (flag == "--limit") limit = std::stoll(value);
  }
  std::string text;
  try {
    text = read_text_file(spec.prompts.string());
    if (spec.data && !spec.data->fields.empty()) {
      // The lines as the run reads them: through data.fields (each line's problems named by braid data).
      data::FieldMap map;
      for (const auto& f : spec.data->fields) data::add_field(map, f);
      std::string mapped;
      for (const auto& line : data::map_lines(text, spec.prompts.string(), map)) mapped += line + "\n";
      text = std::move(mapped);
    }
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) c.fail("prompts", p + " (data.fields)");
    if (e.problems().empty()) c.fail("prompts", e.what());
    return;
  } catch (const std::exception& e) {
    c.fail("prompts", e.what());
    return;
  }
  if (!math) return;
  const auto problems = score::math_prompt_problems(text, spec.prompts.string(), limit);
  constexpr std::size_t kListed = 10;
  for (std::size_t i = 0; i < std::min(problems.size(), kListed); ++i) {
    c.fail("prompts", problems[i] + " (models.reward.rule is math)");
  }
  if (problems.size() > kListed) c.fail("prompts", fmt::format("(the first {} shown; {} lines in all)", kListed, problems.size()));
}

// The ratio's clip range: braid-train refuses a clip-higher below the floor's ε; the run
// file is refused now, naming the key that sets it.
void check_clip_range(Checker& c, const json& train, const std::string& algorithm) {
  const auto a = rl::algorithm_named(algorithm);
  if (!a || !train.is_object()) return;
  const auto number = [&](const char* key) -> std::optional<double> {
    return train.contains(key) && train[key].is_number() ? std::optional(train[key].get<double>()) : std::nullopt;
  };
  const auto clip = number("clip");
  const double low = number("clip_low").value_or(clip.value_or(a->clip_low));
  const double high = number("clip_high").value_or(clip.value_or(a->clip_high));
  if (high >= low) return;
  const char* key = train.contains("clip_high") ? "train.clip_high" : train.contains("clip_low") ? "train.clip_low" : "train.clip";
  c.fail(key, fmt::format("the clip range's upper ε {} is below its lower ε {} ({}'s clip-higher is {} / {}): "
                          "clip_high must be at least clip_low",
                          high, low, algorithm, a->clip_low, a->clip_high));
}

// train.min_lr: the floor of the learning rate's decay (train.lr_schedule, which spans the
// whole run: plan.cpp passes --lr-calls, the iterations left) lies below the peak.
void check_min_lr(Checker& c, const json& train) {
  if (train.contains("min_lr") && train.contains("lr") && train["min_lr"].is_number() && train["lr"].is_number() &&
      train["min_lr"].get<double>() > train["lr"].get<double>()) {
    c.fail("train.min_lr", "must not exceed train.lr (the decay ends at min_lr)");
  }
  if (train.contains("min_lr") && (!train.contains("lr_schedule") || train["lr_schedule"] == "constant")) {
    c.fail("train.min_lr", "only with train.lr_schedule cosine or linear (a constant rate has no decay to end)");
  }
}

// score.kl_target / score.kl_horizon: the adaptive KL coefficient (Ziegler et al. 2019,
// TRL's AdaptiveKLController) of PPO's reward penalty.
void read_kl_control(Checker& c, const json& score, RunSpec& spec) {
  if (score.contains("kl_horizon") && !score.contains("kl_target")) {
    c.fail("score.kl_horizon", "only with score.kl_target (the adaptive KL coefficient)");
  }
  if (!score.contains("kl_target")) return;
  spec.kl_target = c.number(score, "score", "kl_target", {.min = 0, .max = 1e6, .exclusive_min = true});
  spec.kl_horizon = c.number(score, "score", "kl_horizon", {.min = 0, .max = 1e12, .exclusive_min = true}, 10000.0)
                        .value_or(10000.0);
  if (!spec.uses_critic()) {
    c.fail("score.kl_target", fmt::format("adapts PPO's KL penalty in the reward (braid-score --kl-coef); under {} "
                                          "the KL coefficients (score.kl_coef, train.kl_coef) stay fixed",
                                          spec.algorithm));
  }
  spec.kl_coef_start = score::default_kl_coef(spec.algorithm);
  auto coef = std::find_if(spec.score.begin(), spec.score.end(), [](const auto& f) { return f.first == "--kl-coef"; });
  if (coef != spec.score.end()) {
    spec.kl_coef_start = std::stod(coef->second);
    spec.score.erase(coef);
    if (!(spec.kl_coef_start > 0)) c.fail("score.kl_coef", "must be > 0 with score.kl_target (a coefficient of 0 never adapts)");
  }
}

// The rollout's ranks, its long-tail migration and whether it is fused (docs/formats-run.md).
void read_rollout(Checker& c, const json& gen, RunSpec& spec) {
  if (!gen.is_object()) return;
  if (gen.contains("ranks")) {
    spec.rollout_ranks = static_cast<int>(c.integer(gen, "generate", "ranks", {.min = 1, .max = 65536}).value_or(1));
  }
  const bool several = spec.rollout_ranks > 1;
  if (gen.contains("migrate_threshold")) {
    const json& v = gen["migrate_threshold"];
    if (v.is_number_integer()) {
      if (auto n = c.integer(gen, "generate", "migrate_threshold", {.min = 0, .max = kMaxCount})) {
        spec.migrate_threshold = fmt::format("{}", *n);
      }
    } else if (auto f = c.number(gen, "generate", "migrate_threshold", {.min = 0, .max = 1, .exclusive_min = true})) {
      // A fraction keeps its point ("1.0", not "1"): braid-generate reads "1" as a count.
      std::string text = fmt::format("{}", *f);
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
      spec.migrate_threshold = text;
    }
    if (!several) c.fail("generate.migrate_threshold", "only with generate.ranks > 1 (migration moves samples between ranks)");
  }
  if (gen.contains("migrate_to")) {
    if (auto m = c.integer(gen, "generate", "migrate_to", {.min = 1, .max = 65536})) {
      spec.migrate_to = static_cast<int>(*m);
      if (several && *m >= spec.rollout_ranks) {
        c.fail("generate.migrate_to", fmt::format("is {}, must be below generate.ranks ({}): some rank must be freed",
                                                  *m, spec.rollout_ranks));
      }
    }
    if (!gen.contains("migrate_threshold")) c.fail("generate.migrate_to", "only with generate.migrate_threshold");
  }
  spec.fuse = several;
  if (gen.contains("fuse")) {
    if (auto f = c.boolean(gen, "generate", "fuse")) {
      spec.fuse = *f;
      if (*f && !several) c.fail("generate.fuse", "only with generate.ranks > 1 (the ranks freed by generation score)");
    }
  }
}

// The run file's "plan": a braid.plan file ("plan.json", or {"file", "experiment"} when
// the plan's inputs.experiment is not to be found), or what braid run makes one from with
// braid-meshplan ({"experiment", "cluster", "profile" | "hardware", "options"}); either may
// give braid-schedgen's options for the fused training ("schedgen_options").
void read_plan(Checker& c, const json& doc, const fs::path& dir, RunSpec& spec) {
  RunPlan plan;
  const json& v = doc["plan"];
  auto words = [&](const json& obj, const char* key, std::vector<std::string>& out) {
    for (const auto& [field, item] : c.array_items(obj, "plan", key)) {
      if (!item->is_string() || item->get<std::string>().empty()) {
        c.fail(field, "expected a non-empty string (one word of the command line)");
        continue;
      }
      out.push_back(item->get<std::string>());
    }
  };
  auto file_of = [&](const json& obj, const char* key) -> std::optional<fs::path> {
    auto s = c.string(obj, "plan", key);
    if (!s) return std::nullopt;
    fs::path p = resolve(dir, *s);
    if (!fs::is_regular_file(p)) c.fail(Checker::path("plan", key), "no file " + p.string());
    return p;
  };
  if (v.is_string()) {
    plan.file = resolve(dir, v.get<std::string>());
    if (!fs::is_regular_file(plan.file)) {
      c.fail("plan", "no file " + plan.file.string());
      return;
    }
  } else if (v.is_object()) {
    c.no_unknown_keys(v, "plan", {"file", "experiment", "cluster", "profile", "hardware", "options", "schedgen_options"});
    if (v.contains("schedgen_options")) words(v, "schedgen_options", plan.schedgen_options);
    if (v.contains("experiment")) plan.experiment = file_of(v, "experiment");
    if (v.contains("file")) {
      for (const char* k : {"cluster", "profile", "hardware", "options"}) {
        if (v.contains(k)) c.fail(Checker::path("plan", k), "only without \"file\" (what braid run makes a plan from)");
      }
      auto f = file_of(v, "file");
      if (!f) return;
      plan.file = *f;
    } else {
      PlanRequest req;
      if (!v.contains("experiment")) c.fail("plan.experiment", "missing: give \"file\" (a plan) or \"experiment\", "
                                                                "\"cluster\" and \"profile\" (braid run makes the plan)");
      if (plan.experiment) req.experiment = *plan.experiment;
      if (auto cl = file_of(v, "cluster")) req.cluster = *cl;
      if (v.contains("profile") == v.contains("hardware")) {
        c.fail("plan", fmt::format("give one of \"profile\" (a braid.profile) and \"hardware\" ({} or a hardware file)",
                                   fmt::join(plan::hardware_preset_names(), ", ")));
      }
      if (v.contains("profile")) req.profile = file_of(v, "profile");
      if (v.contains("hardware")) {
        if (auto h = c.string(v, "plan", "hardware")) {
          const auto presets = plan::hardware_preset_names();
          const bool preset = std::find(presets.begin(), presets.end(), *h) != presets.end();
          req.hardware = preset ? *h : resolve(dir, *h).string();
        }
      }
      if (v.contains("options")) words(v, "options", req.options);
      plan.request = req;
    }
  } else {
    c.fail("plan", "expected a braid.plan file, or an object (\"file\", or \"experiment\", \"cluster\", \"profile\")");
    return;
  }
  spec.run_plan = std::move(plan);
}

// A fused GRPO rollout scores each shard on one rank alone: its groups must be whole
// (braid-generate refuses it too, but only once the run has started).
void check_fused_grpo(Checker& c, const json& gen, const RunSpec& spec) {
  const auto int_of = [&](const char* key) -> std::int64_t {
    return gen.is_object() && gen.contains(key) && gen[key].is_number_integer() ? gen[key].get<std::int64_t>() : 0;
  };
  const std::int64_t group = int_of("samples_per_prompt"), shard = int_of("shard_size");
  const auto algorithm = rl::algorithm_named(spec.algorithm);
  const bool grouped = algorithm && rl::grouped(algorithm->estimator);
  if (spec.fuse && grouped && group > 1 && (shard <= 0 || shard % group != 0)) {
    c.fail("generate.shard_size",
           fmt::format("{}: a fused rollout with group advantages scores each shard on one rank, so a shard must hold whole groups: "
                       "give a multiple of samples_per_prompt ({}), or \"fuse\": false",
                       shard > 0 ? fmt::format("is {}", shard) : std::string("missing"), group));
  }
}

// mpirun's options for every mpirun of the run, and a hostfile beside the run file.
void read_mpirun(Checker& c, const json& mpi, const fs::path& dir, RunSpec& spec) {
  if (!mpi.is_object()) return;
  c.no_unknown_keys(mpi, "mpirun", {"options", "hostfile"});
  if (mpi.contains("options")) {
    for (const auto& [field, item] : c.array_items(mpi, "mpirun", "options")) {
      if (!item->is_string() || item->get<std::string>().empty()) {
        c.fail(field, "expected a non-empty string (one word of mpirun's command line)");
        continue;
      }
      spec.mpirun_options.push_back(item->get<std::string>());
    }
  }
  if (auto host = mpi.contains("hostfile") ? c.string(mpi, "mpirun", "hostfile") : std::nullopt) {
    const fs::path file = resolve(dir, *host);
    if (!fs::is_regular_file(file)) c.fail("mpirun.hostfile", "no file " + file.string());
    spec.mpirun_options.insert(spec.mpirun_options.end(), {"--hostfile", file.string()});
  }
}

// The "data" section: the prompt stream each iteration takes from (batch_prompts, shuffle,
// seed), and braid data's field map and held-out split.
void read_data(Checker& c, const json& doc, RunSpec& spec) {
  const json& d = c.object(doc, "", "data");
  if (!d.is_object()) return;
  c.no_unknown_keys(d, "data", {"batch_prompts", "shuffle", "seed", "fields", "heldout", "dynamic_sampling"});
  DataSpec ds;
  ds.batch_prompts = c.integer(d, "data", "batch_prompts", {.min = 1, .max = kMaxCount}, 0).value_or(0);
  ds.shuffle = c.boolean(d, "data", "shuffle", true).value_or(true);
  ds.seed = static_cast<std::uint64_t>(c.integer(d, "data", "seed", {.min = 0}, std::int64_t(spec.seed)).value_or(0));
  if (d.contains("fields")) {
    const json& f = c.object(d, "data", "fields");
    if (f.is_object()) {
      data::FieldMap map;
      for (const auto& [name, key] : f.items()) {
        const std::string at = Checker::path("data.fields", name);
        if (!key.is_string()) {
          c.fail(at, "expected the prompt file's key (a string)");
          continue;
        }
        if (auto problem = data::add_field(map, name + "=" + key.get<std::string>())) c.fail(at, *problem);
        ds.fields.push_back(name + "=" + key.get<std::string>());
      }
    }
  }
  if (d.contains("heldout")) {
    const json& h = d["heldout"];
    if (h.is_number_integer()) {
      ds.heldout.count = c.integer(d, "data", "heldout", {.min = 1, .max = kMaxCount}).value_or(0);
    } else {
      ds.heldout.fraction = c.number(d, "data", "heldout", {.min = 0, .max = 1, .exclusive_min = true}).value_or(0);
      if (ds.heldout.fraction >= 1) c.fail("data.heldout", "a fraction below 1, or a count of lines");
    }
  }
  // Dynamic sampling: on by default under dapo (3 rounds) where it can run; true/false or
  // {"max_rounds": N} to choose.
  constexpr int kDefaultRounds = 3;
  const auto algorithm = rl::algorithm_named(spec.algorithm);
  const std::string cannot = [&]() -> std::string {
    if (ds.batch_prompts == 0) return "needs data.batch_prompts (the batch it refills)";
    if (!algorithm || !rl::grouped(algorithm->estimator)) {
      return fmt::format("drops groups of equal rewards: {} has no groups", spec.algorithm);
    }
    if (spec.overcommit) return "not with generate.overcommit (choose one)";
    if (spec.async) return "not with \"async\"";
    if (spec.rollout_ranks > 1) return "runs the piped rollout: not with generate.ranks > 1";
    return "";
  }();
  if (!d.contains("dynamic_sampling")) {
    if (algorithm && algorithm->filter_groups && cannot.empty()) ds.dynamic_rounds = kDefaultRounds;
  } else {
    const json& v = d["dynamic_sampling"];
    if (v.is_boolean()) {
      ds.dynamic_rounds = v.get<bool>() ? kDefaultRounds : 0;
    } else if (v.is_object()) {
      c.no_unknown_keys(v, "data.dynamic_sampling", {"max_rounds"});
      ds.dynamic_rounds = static_cast<int>(
          c.integer(v, "data.dynamic_sampling", "max_rounds", {.min = 1, .max = 100}, kDefaultRounds).value_or(kDefaultRounds));
    } else {
      c.fail("data.dynamic_sampling", "expected true, false or {\"max_rounds\": N}");
    }
    if (ds.dynamic_rounds > 0 && !cannot.empty()) c.fail("data.dynamic_sampling", cannot);
  }
  spec.data = ds;
}

// data.heldout must leave lines to train on: checked against the prompt file now, not when
// braid data runs.
void check_heldout(Checker& c, const RunSpec& spec) {
  if (!spec.data || !spec.data->heldout.any() || !fs::is_regular_file(spec.prompts)) return;
  std::int64_t lines = 0;
  try {
    for_each_jsonl_line(read_text_file(spec.prompts.string()), 0, [&](std::int64_t, std::string_view) { ++lines; });
    spec.data->heldout.of(lines);
  } catch (const std::exception& e) {
    c.fail("data.heldout", fmt::format("{} ({})", e.what(), spec.prompts.string()));
  }
}

// The "checkpoints" section: save_every and keep_last (driver/retention.hpp).
void read_checkpoints(Checker& c, const json& doc, RunSpec& spec) {
  const json& k = c.object(doc, "", "checkpoints");
  if (!k.is_object()) return;
  c.no_unknown_keys(k, "checkpoints", {"save_every", "keep_last"});
  CheckpointSpec cs;
  cs.save_every = static_cast<int>(c.integer(k, "checkpoints", "save_every", {.min = 1, .max = 9999}, 0).value_or(0));
  cs.keep_last = static_cast<int>(c.integer(k, "checkpoints", "keep_last", {.min = 1, .max = 9999}, 0).value_or(0));
  if (!k.contains("save_every") && !k.contains("keep_last")) {
    c.fail("checkpoints", "give \"save_every\" and/or \"keep_last\", or leave the section out");
  }
  if (spec.async && cs.keep_last == 1) {
    c.fail("checkpoints.keep_last", "is 1, but under \"async\" the next rollout samples with the checkpoint before the "
                                    "newest: keep at least 2");
  }
  spec.checkpoints = cs;
}

// The "eval" section: the prompts to evaluate on and how (braid eval's keyed options,
// checked by the run file's bounds); the reward that decides right from wrong is the
// section's rule or command, else the run's own when it is one.
void read_eval(Checker& c, const json& doc, const fs::path& dir, RunSpec& spec) {
  const json& e = c.object(doc, "", "eval");
  if (!e.is_object()) return;
  EvalSpec ev;
  cli::read_keyed(c, e, "eval", eval_section_schema(), ev, /*run_file=*/true);
  eval::PolicyEvalOptions& p = ev.policy;
  if (!e.contains("prompts") && spec.data && spec.data->heldout.any()) {
    ev.heldout_split = true;  // data.heldout's lines, split off by braid data
  } else if (!e.contains("prompts")) {
    c.string(e, "eval", "prompts");   // missing
  } else if (!p.prompts.empty()) {
    p.prompts = resolve(dir, p.prompts).string();
    if (!fs::is_regular_file(p.prompts)) c.fail("eval.prompts", "no file " + p.prompts);
  }
  if (e.contains("k")) {
    for (std::size_t i = 0; i < p.k.size(); ++i) {
      if (p.k[i] > p.samples) {
        c.fail(e.at("k").is_array() ? fmt::format("eval.k[{}]", i) : std::string("eval.k"),
               fmt::format("k = {} is above eval.samples ({}): pass@k and maj@k need k <= n", p.k[i], p.samples));
      }
    }
  }
  if (e.contains("rule") && e.contains("command")) c.fail("eval", "give one of \"rule\" and \"command\", not both");
  if (e.contains("timeout") && !e.contains("command")) c.fail("eval.timeout", "only with \"command\"");
  if (e.contains("rule")) {
    if (e.at("rule").is_string()) {
      if (auto problem = rule_problem(p.reward_rule)) c.fail("eval.rule", *problem);
    }
  } else if (e.contains("command")) {
    p.reward_cmd_dir = dir.string();
    if (e.at("command").is_string() && p.reward_cmd.find_first_not_of(" \t") == std::string::npos) {
      c.fail("eval.command", "is empty: give the scorer's command line");
    }
  } else if (spec.reward.kind == ModelSource::Kind::rule) {
    p.reward_rule = spec.reward.rule;
  } else if (spec.reward.kind == ModelSource::Kind::command) {
    p.reward_cmd = spec.reward.command;
    p.reward_cmd_dir = spec.reward.command_dir.string();
    p.reward_cmd_timeout = spec.reward.command_timeout;
  } else if (spec.reward.kind != ModelSource::Kind::absent) {
    c.fail("eval.rule", "missing: models.reward is a model, so name the rule (e.g. \"math\") or command that decides "
                        "whether a held-out answer is right");
  }
  if (!e.contains("max_new_tokens")) {
    for (const auto& [flag, value] : spec.generate) {
      if (flag == "--max-new-tokens") p.max_new_tokens = std::stoll(value);
    }
  }
  if (p.reward_rule == "math" && !p.prompts.empty() && fs::is_regular_file(p.prompts)) {
    try {
      const auto problems = score::math_prompt_problems(read_text_file(p.prompts), p.prompts);
      constexpr std::size_t kListed = 10;
      for (std::size_t i = 0; i < std::min(problems.size(), kListed); ++i) c.fail("eval.prompts", problems[i] + " (eval.rule is math)");
    } catch (const std::exception& ex) {
      c.fail("eval.prompts", ex.what());
    }
  }
  spec.eval = ev;
}

// The "ablation" section: which iterations run again with the fusions off (every N, and/or
// a list), and the braid-meshplan plan whose predictions go beside the measurement.
void read_ablation_spec(Checker& c, const json& doc, const fs::path& dir, RunSpec& spec) {
  const json& a = c.object(doc, "", "ablation");
  if (!a.is_object()) return;
  c.no_unknown_keys(a, "ablation", {"every", "iterations", "plan"});
  AblationSpec ab;
  if (a.contains("every")) ab.every = static_cast<int>(c.integer(a, "ablation", "every", {.min = 1, .max = 9999}).value_or(0));
  if (a.contains("iterations")) {
    for (const auto& [field, item] : c.array_items(a, "ablation", "iterations")) {
      if (!item->is_number_integer() || item->get<long long>() < 1 || item->get<long long>() > spec.iterations) {
        c.fail(field, fmt::format("expected an iteration of the run, 1 to {}", spec.iterations));
        continue;
      }
      ab.iterations.push_back(item->get<int>());
    }
  }
  if (!a.contains("every") && !a.contains("iterations")) {
    c.fail("ablation", "give \"every\" (N: every N-th iteration) or \"iterations\" (a list), or leave the section out");
  }
  if (a.contains("plan")) {
    if (auto p = c.string(a, "ablation", "plan")) {
      ab.plan = resolve(dir, *p);
      if (!fs::is_regular_file(*ab.plan)) c.fail("ablation.plan", "no file " + ab.plan->string());
    }
  }
  if (spec.async) c.fail("ablation", "not with \"async\": an asynchronous iteration has no serial twin to time");
  if (spec.data && spec.data->dynamic_rounds > 0) {
    c.fail("ablation", "not with data.dynamic_sampling: its refill rounds are decided as the iteration runs");
  }
  spec.ablation = ab;
}

}  // namespace

const cli::OptionSchema<EvalSpec>& eval_section_schema() {
  static const cli::OptionSchema<EvalSpec> s = [] {
    cli::OptionSchema<EvalSpec> out;
    for (auto& entry : cli::nested<EvalSpec>(eval::policy_schema(), &EvalSpec::policy)) {
      if (!entry.spec.key.empty()) out.push_back(std::move(entry));
    }
    // `every`, after `prompts`: the driver's own (which iterations evaluate), a key alone.
    auto every = cli::field<EvalSpec>(
        &EvalSpec::every, {.type = cli::OptionType::integer,
                           .help = "Evaluate every N iterations; the start and the last are always evaluated",
                           .key = "every", .bounds = {.min = 1, .max = 9999}});
    out.insert(out.begin() + 1, std::move(every));
    return out;
  }();
  return s;
}

RunSpec load_run_file(const fs::path& path) {
  const json doc = load_json_file(path.string());
  Checker c(path.string());
  c.format(doc, kRunFormat, kRunVersion);
  if (!doc.is_object()) c.check();
  c.no_unknown_keys(doc, "", {"format", "version", "comment", "algorithm", "models", "prompts", "tokenizer",
                              "tools", "chat_template_kwargs",
                              "iterations", "seed", "threads", "device", "dtype", "async", "generate", "score", "train",
                              "mpirun", "plan", "eval", "ablation", "data", "checkpoints"});
  RunSpec spec;
  spec.file = path;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (auto a = c.string(doc, "", "algorithm", rl::algorithm_names(), "ppo")) {
    spec.algorithm = *a;
  } else {
    // Reported; the rest is read as PPO's when the file gives a critic, else as GRPO's, so
    // that the one mistake is not reported again as a critic missing or not used.
    const json* models = doc.contains("models") ? &doc["models"] : nullptr;
    spec.algorithm = models != nullptr && models->is_object() && models->contains("critic") ? "ppo" : "grpo";
  }
  read_models(c, doc, dir, spec);

  if (auto prompts = c.string(doc, "", "prompts")) {
    spec.prompts = resolve(dir, *prompts);
    if (!fs::is_regular_file(spec.prompts)) c.fail("prompts", "no file " + spec.prompts.string());
  }
  if (auto tok = c.string(doc, "", "tokenizer", {}, "byte")) {
    spec.tokenizer = *tok == "byte" ? *tok : resolve(dir, *tok).string();
    if (*tok != "byte" && !fs::exists(spec.tokenizer)) c.fail("tokenizer", "no file " + spec.tokenizer);
  }
  if (doc.contains("tools")) {
    if (auto tools = c.string(doc, "", "tools")) {
      spec.tools = resolve(dir, *tools);
      const std::string text = fs::is_regular_file(*spec.tools) ? read_text_file(spec.tools->string()) : "";
      // nlohmann recurses: a file 100,000 deep overflowed the stack
      const json schemas = json_depth_problem(text) ? json() : json::parse(text, nullptr, false);
      if (!schemas.is_array()) c.fail("tools", "must name a JSON file holding an array of tool schemas: " + spec.tools->string());
    }
  }
  if (doc.contains("chat_template_kwargs")) spec.chat_template_kwargs = c.object(doc, "", "chat_template_kwargs").dump();
  spec.iterations = static_cast<int>(c.integer(doc, "", "iterations", {.min = 1, .max = 9999}).value_or(1));
  spec.seed = static_cast<std::uint64_t>(c.integer(doc, "", "seed", {.min = 0}, 0).value_or(0));
  if (doc.contains("threads")) {
    if (auto t = c.integer(doc, "", "threads", {.min = 1, .max = 4096})) spec.threads = static_cast<int>(*t);
  }
  if (doc.contains("dtype")) spec.dtype = c.string(doc, "", "dtype", {"f32", "bf16"});

  if (doc.contains("device")) {
    if (auto d = c.string(doc, "", "device")) {
      std::string problem;
      if (backend::parse_device(*d, &problem)) {
        spec.device = *d;
      } else {
        c.fail("device", problem);
      }
    }
  }

  // Each stage section is optional: a tool's defaults are a fine start.
  auto section = [&](const char* key) -> const json& {
    static const json empty = json::object();
    return doc.contains(key) ? c.object(doc, "", key) : empty;
  };
  const json& gen = section("generate");
  c.no_unknown_keys(gen, "generate", keys_of(generate_settings(), {"ranks", "migrate_threshold", "migrate_to", "fuse", "overcommit"}));
  spec.generate = read_settings(c, gen, "generate", generate_settings());
  // What braid-generate would refuse as given but not read (generate/stage.cpp).
  if (gen.contains("temperature") && gen["temperature"] == 0) {
    for (const char* key : {"top_p", "top_k"}) {
      if (gen.contains(key)) c.fail(Checker::path("generate", key), "generate.temperature 0 decodes greedily: nothing to shape");
    }
  }
  read_rollout(c, gen, spec);
  if (doc.contains("mpirun")) read_mpirun(c, c.object(doc, "", "mpirun"), dir, spec);
  if (gen.contains("overcommit")) {
    if (auto v = c.integer(gen, "generate", "overcommit", {.min = 0, .max = kMaxCount})) spec.overcommit = static_cast<int>(*v);
  }
  if (doc.contains("async")) {
    if (!doc["async"].is_boolean()) {
      c.fail("async", "expected true or false");
    } else {
      spec.async = doc["async"].get<bool>();
    }
  }
  if (spec.async && spec.overcommit) {
    c.fail("async", "does not go with generate.overcommit: a deferred sample's tokens would be more than one step "
                    "stale (choose one; docs/overlap.md)");
  }
  if (spec.overcommit && spec.rollout_ranks > 1) {
    c.fail("generate.overcommit", "runs in one process: not with generate.ranks > 1 (docs/overlap.md)");
  }
  const json& score = section("score");
  c.no_unknown_keys(score, "score", keys_of(score_settings(), {"kl_target", "kl_horizon"}));
  spec.score = read_settings(c, score, "score", score_settings());
  if (score.contains("norm_by_std")) {
    const auto algorithm = rl::algorithm_named(spec.algorithm);
    if (algorithm && algorithm->estimator != rl::Estimator::group) {
      c.fail("score.norm_by_std", fmt::format("{} has no group-mean advantages to scale (grpo, dr-grpo, dapo, gspo, "
                                              "reinforce++-baseline have)",
                                              spec.algorithm));
    }
  }
  if (const auto algorithm = rl::algorithm_named(spec.algorithm)) {
    // What braid-score would refuse as set but not read under this algorithm (score/command.cpp).
    if (score.contains("lambda") && !algorithm->critic) {
      c.fail("score.lambda", fmt::format("only GAE (ppo) has a λ; {} does not read it", spec.algorithm));
    }
    if (score.contains("gamma") && rl::grouped(algorithm->estimator)) {
      c.fail("score.gamma", fmt::format("{}'s group advantages take no discount", spec.algorithm));
    }
    if (score.contains("overlong_penalty") && !score.contains("overlong_buffer") && !(algorithm->overlong_fraction > 0)) {
      c.fail("score.overlong_penalty", fmt::format("no overlong shaping under {} without score.overlong_buffer", spec.algorithm));
    }
    const double kl = score.contains("kl_coef") && score["kl_coef"].is_number() ? score["kl_coef"].get<double>()
                                                                                 : score::default_kl_coef(spec.algorithm);
    if (score.contains("kl_estimator") && !score.contains("kl_target") && kl == 0) {
      c.fail("score.kl_estimator", fmt::format("the KL coefficient is 0 ({}): no KL penalty to estimate",
                                               score.contains("kl_coef") ? "score.kl_coef" : spec.algorithm + "'s default"));
    }
  }
  read_kl_control(c, score, spec);
  const json& train = section("train");
  const auto train_keys = train::train_run_file_specs(spec.algorithm);
  c.no_unknown_keys(train, "train", keys_of(train_keys, {"schedule", "ranks", "fuse"}));
  spec.train = read_settings(c, train, "train", train_keys);
  check_clip_range(c, train, spec.algorithm);
  check_min_lr(c, train);
  if (train.contains("schedule")) {
    if (auto s = c.string(train, "train", "schedule")) {
      spec.schedule = resolve(dir, *s);
      read_schedule(c, *spec.schedule, spec, train.contains("ranks"));
    }
  }
  if (doc.contains("data")) read_data(c, doc, spec);
  check_heldout(c, spec);
  if (doc.contains("checkpoints")) read_checkpoints(c, doc, spec);
  check_prompts_for_reward(c, spec);
  if (doc.contains("eval")) read_eval(c, doc, dir, spec);
  if (doc.contains("ablation")) read_ablation_spec(c, doc, dir, spec);
  if (train.contains("ranks")) {
    if (!train.contains("schedule")) c.fail("train.ranks", "only with a schedule (the fused pipeline under mpirun)");
    spec.ranks = static_cast<int>(c.integer(train, "train", "ranks", {.min = 1, .max = 65536}).value_or(1));
  }
  // What the run file sets wins over a plan.
  for (const auto& [name, part] : {std::pair{"generate", &gen}, std::pair{"score", &score}, std::pair{"train", &train}}) {
    if (!part->is_object()) continue;
    for (const auto& item : part->items()) spec.set_keys.push_back(Checker::path(name, item.key()));
  }
  if (train.contains("fuse")) {
    // Whether a plan's actor and critic train as one fused pipeline, fixed instead of predicted.
    spec.train_fuse = c.boolean(train, "train", "fuse");
    if (!doc.contains("plan")) c.fail("train.fuse", "only with a \"plan\" (its fused schedule); or give train.schedule");
    if (train.contains("schedule")) c.fail("train.fuse", "not with train.schedule, which fuses the training already");
  }
  if (doc.contains("plan")) read_plan(c, doc, dir, spec);
  // A plan file is applied now; one braid run makes is applied once made (prepare_plan).
  if (spec.run_plan && !spec.run_plan->request && c.ok()) {
    apply_plan(c, spec);
    if (spec.overcommit && spec.rollout_ranks > 1) {
      c.fail("generate.overcommit", fmt::format("runs in one process: not with the plan's {} generation ranks",
                                                spec.rollout_ranks));
    }
  }
  check_fused_grpo(c, gen, spec);
  c.check();
  return spec;
}

bool RunSpec::sets(std::string_view key) const {
  return std::find(set_keys.begin(), set_keys.end(), key) != set_keys.end();
}

void use_plan_schedule(RunSpec& spec, const fs::path& schedule) {
  Checker c(spec.file.string());
  read_schedule(c, schedule, spec, /*ranks_given=*/true);  // the ranks are the plan's (devices x tp)
  spec.schedule = schedule;
  c.check();
}

}  // namespace braid::driver
