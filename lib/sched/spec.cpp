// Reading and checking a braid.schedspec document.
#include <fmt/format.h>

#include <numeric>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/made_from.hpp"
#include "sched/option_schema.hpp"
#include "sched/problem.hpp"

namespace braid::sched {
namespace {

constexpr int kSpecVersion = 1;
// Beyond this many subtasks the flat arrays and the annealing stop being "seconds".
constexpr long long kMaxTasks = 20'000'000;

bool is_power_of_two(long long v) { return v > 0 && (v & (v - 1)) == 0; }

// Sums every `group` consecutive values (the tp merge of RLHFuse §5.2).
std::vector<double> merge_stages(const std::vector<double>& v, int group) {
  std::vector<double> out(v.size() / static_cast<std::size_t>(group), 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) out[i / static_cast<std::size_t>(group)] += v[i];
  return out;
}

}  // namespace

// braid-meshplan's plan.json carries the spec of its fused training stage; take it from there,
// after checking the plan itself (format, version, keys, calls) as braid-meshplan writes it.
constexpr int kPlanVersion = 1;  // plan/plan_output.hpp; sched does not depend on plan

static json spec_of_plan(const json& plan, const std::string& origin) {
  Checker c(origin);
  c.format(plan, "braid.plan", kPlanVersion);
  c.no_unknown_keys(plan, "", {"format", "version", "inputs", "cluster", "search", "calls", "memory", "predicted",
                               "fusion", "made_from"});
  c.array_items(plan, "", "calls", 1);
  if (plan.is_object() && plan.contains("made_from")) {
    if (auto why = made_from_problem(ordered_json::parse(plan["made_from"].dump()))) c.fail("made_from", *why);
  }
  c.check();
  const json* spec = &plan;
  for (const char* key : {"fusion", "intra_stage", "schedspec"}) {
    if (!spec->is_object() || !spec->contains(key)) {
      throw InputError(origin, "fusion.intra_stage.schedspec",
                       "missing: this braid.plan has no fused training stage to schedule "
                       "(was it planned with --no-intra-fusion?)");
    }
    spec = &(*spec)[key];
  }
  return *spec;
}

// True when doc says it is a braid.plan (a "format" that is not a string is left to the checker).
static bool is_plan(const json& doc) {
  if (!doc.is_object()) return false;
  const auto it = doc.find("format");
  return it != doc.end() && it->is_string() && it->get<std::string>() == "braid.plan";
}

SchedSpec parse_schedspec(const std::string& json_text, const std::string& origin) {
  json doc = parse_json_text(json_text, origin);
  if (is_plan(doc)) doc = spec_of_plan(doc, origin);
  return schedspec_from_json(doc, origin);
}

SchedSpec schedspec_from_json(const json& doc, const std::string& origin, std::string_view root, bool written) {
  Checker c(origin);
  // A spec as braid-schedgen writes it into a schedule holds every key: one missing is damage,
  // not a default.
  const auto dflt = [written]<typename T>(T v) { return written ? std::nullopt : std::optional<T>(v); };
  const auto at = [root](std::string_view key) { return Checker::path(root, key); };
  c.format(doc, "braid.schedspec", kSpecVersion, root);
  c.check();
  c.no_unknown_keys(doc, root, {"format", "version", "devices", "models", "mem_capacity", "p2p_time", "comment", "anneal"});

  SchedSpec spec;
  if (doc.contains("anneal")) {
    spec.anneal = c.object(doc, root, "anneal");
    check_anneal_block(c, spec.anneal, at("anneal"));
  }
  spec.devices = static_cast<int>(c.integer(doc, root, "devices", {.min = 1, .max = 1 << 20}).value_or(1));
  spec.p2p_time = c.number(doc, root, "p2p_time", {.min = 0, .max = kMaxTime}, dflt(0.0)).value_or(0.0);
  if (written && !doc.contains("mem_capacity")) c.fail(at("mem_capacity"), "missing (required; null: no limit)");
  if (auto it = doc.find("mem_capacity"); it != doc.end() && !it->is_null()) {
    spec.mem_capacity = c.number(doc, root, "mem_capacity", {.min = 0, .exclusive_min = true});
  }

  std::set<std::string> names;
  std::vector<std::string> model_fields;
  for (auto [where, item] : c.array_items(doc, root, "models", 1)) {
    const json& m = *item;
    // A written spec is the one after the tp merge: it has no tp to merge by again.
    std::vector<std::string> keys = {"name", "stages", "replicas", "micro_batches", "fwd", "bwd", "act_mem", "direction"};
    if (!written) keys.emplace_back("tp");
    c.no_unknown_keys(m, where, keys);
    ModelSpec ms;
    ms.name = c.string(m, where, "name", {}, dflt(fmt::format("model{}", spec.models.size()))).value_or("");
    if (!names.insert(ms.name).second) c.fail(Checker::path(where, "name"), "repeats an earlier model's name");
    auto stages = c.integer(m, where, "stages", {.min = 1, .max = 1 << 16});
    ms.replicas = static_cast<int>(c.integer(m, where, "replicas", {.min = 1, .max = 1 << 16}, dflt(std::int64_t{1})).value_or(1));
    ms.micro_batches = static_cast<int>(c.integer(m, where, "micro_batches", {.min = 1, .max = 1 << 20}).value_or(1));
    ms.tp = static_cast<int>(c.integer(m, where, "tp", {.min = 1, .max = 1 << 16}, 1).value_or(1));
    if (!is_power_of_two(ms.tp)) c.fail(Checker::path(where, "tp"), fmt::format("is {}, must be a power of two", ms.tp));
    const auto direction = c.string(m, where, "direction", {"forward", "reverse"},
                                    dflt(std::string(spec.models.empty() ? "forward" : "reverse")));
    ms.forward = direction.value_or("forward") == "forward";
    if (stages) {
      ms.stages = static_cast<int>(*stages);
      const auto n = static_cast<std::size_t>(ms.stages);
      const Bounds time{.min = 0, .max = kMaxTime, .exclusive_min = true};
      ms.fwd = c.number_or_list(m, where, "fwd", n, time).value_or(std::vector<double>(n, 1.0));
      ms.bwd = c.number_or_list(m, where, "bwd", n, time).value_or(std::vector<double>(n, 1.0));
      ms.act_mem = c.number_or_list(m, where, "act_mem", n, {.min = 0, .max = kMaxActMem}).value_or(std::vector<double>(n, 0.0));
    }
    model_fields.push_back(where);
    spec.models.push_back(std::move(ms));
  }
  c.check();

  // Stage merge for tensor-parallel mismatch: every fused stage then spans tp_max GPUs.
  int tp_max = 1;
  for (const auto& m : spec.models) tp_max = std::max(tp_max, m.tp);
  for (std::size_t i = 0; i < spec.models.size(); ++i) {
    auto& m = spec.models[i];
    const int group = tp_max / m.tp;
    if (group == 1) continue;
    if (m.stages % group != 0) {
      c.fail(Checker::path(model_fields[i], "stages"),
             fmt::format("is {}, must be divisible by {} (tp {} merged to the largest tp {})", m.stages, group,
                         m.tp, tp_max));
      continue;
    }
    m.fwd = merge_stages(m.fwd, group);
    m.bwd = merge_stages(m.bwd, group);
    m.act_mem = merge_stages(m.act_mem, group);
    m.stages /= group;
    m.merged_from = group;
  }
  c.check();

  long long batch0 = 0;
  int replica_gcd = 0;
  for (std::size_t i = 0; i < spec.models.size(); ++i) {
    const auto& m = spec.models[i];
    const std::string& where = model_fields[i];
    if (static_cast<long long>(m.replicas) * m.stages != spec.devices) {
      c.fail(Checker::path(where, "replicas"),
             fmt::format("{} replicas x {} stages{} = {} devices, but the spec has devices = {}", m.replicas,
                         m.stages, m.merged_from > 1 ? " (after the tp merge)" : "",
                         static_cast<long long>(m.replicas) * m.stages, spec.devices));
    }
    const long long batch = static_cast<long long>(m.replicas) * m.micro_batches;
    if (i == 0) {
      batch0 = batch;
    } else if (batch != batch0) {
      c.fail(Checker::path(where, "micro_batches"),
             fmt::format("replicas x micro_batches = {}, but {} has {}: the global batch must be equal", batch,
                         spec.models[0].name, batch0));
    }
    replica_gcd = std::gcd(replica_gcd, m.replicas);
  }
  if (spec.models.size() > 1 && replica_gcd > 1) {
    c.fail(at("models"), fmt::format("the replicas (fusion factors) share the factor {}: the problem splits into {} "
                                 "identical independent ones; divide devices and every replicas by {}",
                                 replica_gcd, replica_gcd, replica_gcd));
  }
  long long tasks = 0;
  for (const auto& m : spec.models) tasks += 2LL * m.replicas * m.stages * m.micro_batches;
  if (tasks > kMaxTasks) c.fail(at("models"), fmt::format("{} subtasks in all; at most {} are supported", tasks, kMaxTasks));
  c.check();
  return spec;
}

SchedSpec load_schedspec(const std::string& path) {
  return parse_schedspec(read_text_file(path), is_std_stream(path) ? "<stdin>" : path);
}

SchedSpec only_model(const SchedSpec& spec, int m) {
  SchedSpec out = spec;
  out.models = {spec.models[static_cast<std::size_t>(m)]};
  return out;
}

}  // namespace braid::sched
