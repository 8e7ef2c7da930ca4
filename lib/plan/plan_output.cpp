#include "plan/plan_output.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

namespace braid::plan {
namespace {

double round3(double v) { return std::round(v * 1e3) / 1e3; }
double gb(double bytes) { return round3(bytes / 1e9); }

ordered_json breakdown_json(const Breakdown& b) {
  return {{"generation", round3(b.generation)},
          {"inference", round3(b.inference)},
          {"training", round3(b.training)},
          {"other", round3(b.other)}};
}

std::string short_name(const std::string& call) {
  static const std::map<std::string, std::string> names{{"ref_inf", "ref"},
                                                        {"reward_inf", "rw"},
                                                        {"critic_inf", "critic"},
                                                        {"actor_train", "actor_train"},
                                                        {"critic_train", "critic_train"},
                                                        {"actor_gen", "actor_gen"}};
  auto it = names.find(call);
  return it == names.end() ? call : it->second;
}

}  // namespace

ordered_json plan_to_json(const PlanSpace& space, const SearchResult& r, const PlanInputs& in) {
  const CostModel& cm = space.cost_model();
  const Evaluation& ev = r.eval;
  const int pn = cm.per_node();
  ordered_json j;
  j["format"] = "braid.plan";
  j["version"] = kPlanVersion;
  j["inputs"] = {{"experiment", in.experiment},
                 {"cluster", in.cluster},
                 {"profile", in.profile},
                 {"profile_source", in.profile_source},
                 {"hardware", in.hardware}};
  j["cluster"] = {{"nodes", cm.cluster().nodes},
                  {"devices_per_node", pn},
                  {"usable_memory_gb", gb(cm.device_memory())}};
  j["search"] = {{"method", r.method},
                 {"start", r.start},
                 {"plans_evaluated", r.evaluated},
                 {"plan_space", space.plan_count()},
                 {"seconds", round3(r.seconds)}};
  ordered_json calls = ordered_json::array();
  for (std::size_t c = 0; c < space.calls().size(); ++c) {
    const Call& call = space.calls()[c];
    const Choice& ch = r.plan[c];
    const Mesh& m = space.meshes()[static_cast<std::size_t>(ch.mesh)];
    const Entry& e = space.entries(static_cast<int>(c), ch.mesh)[static_cast<std::size_t>(ch.entry)];
    ordered_json cj;
    cj["name"] = call.name;
    cj["model"] = call.role;
    cj["kind"] = kind_name(call.kind);
    cj["mesh"] = {{"first_device", m.first}, {"devices", m.count}, {"where", m.describe(pn)}};
    cj["strategy"] = {{"dp", e.strategy.dp}, {"tp", e.strategy.tp}, {"pp", e.strategy.pp},
                      {"micro_batches", e.strategy.micro}};
    if (call.kind == CallKind::train) cj["strategy"]["recompute"] = e.strategy.recompute;
    cj["time_s"] = round3(ev.call_time[c]);
    cj["realloc_s"] = round3(ev.realloc[c]);
    cj["start_s"] = round3(ev.call_start[c]);
    cj["end_s"] = round3(ev.call_end[c]);
    cj["memory_gb"] = {{"static", gb(e.estimate.static_bytes)},
                       {"active", gb(e.estimate.active_bytes)},
                       {"weights", gb(e.estimate.layout_weights)}};
    calls.push_back(std::move(cj));
  }
  j["calls"] = std::move(calls);
  j["memory"] = {{"peak_gb", gb(ev.peak_memory)},
                 {"peak_device", ev.peak_device},
                 {"capacity_gb", gb(cm.device_memory())},
                 {"oom", ev.oom}};
  j["predicted"] = {{"iteration_s", round3(ev.time)},
                    {"serial_s", round3(ev.serial)},
                    {"fused_s", round3(ev.fused)},
                    {"speedup", round3(ev.fused > 0 ? ev.serial / ev.fused : 1.0)},
                    {"breakdown", breakdown_json(ev.fused_breakdown)},
                    {"breakdown_serial", breakdown_json(ev.serial_breakdown)}};
  ordered_json inter;
  inter["enabled"] = space.fusion().inter;
  inter["used"] = ev.inter.used;
  if (ev.inter.replicas > 0) {
    inter["replicas"] = ev.inter.replicas;
    inter["r_t"] = ev.inter.r_t;
    inter["r_t_fraction"] = round3(static_cast<double>(ev.inter.r_t) / cm.experiment().global_batch);
    inter["m"] = ev.inter.m;
    inter["bs_max"] = cm.model("actor").bs_max;
    inter["gen_inf_serial_s"] = round3(ev.inter.serial);
    inter["gen_inf_fused_s"] = round3(ev.inter.fused);
    inter["gen_end_s"] = round3(ev.inter.gen_end);
  }
  ordered_json intra;
  intra["enabled"] = space.fusion().intra;
  intra["used"] = ev.intra.used;
  if (!ev.intra.schedspec.is_null()) {
    intra["source"] = ev.intra.source;
    intra["groups"] = ev.intra.groups;
    intra["train_serial_s"] = round3(ev.intra.serial);
    intra["train_fused_s"] = round3(ev.intra.fused);
    intra["step_bound_s"] = round3(ev.intra.per_step_bound);
    intra["schedspec"] = ev.intra.schedspec;
  }
  j["fusion"] = {{"inter_stage", inter}, {"intra_stage", intra}};
  return j;
}

std::string plan_summary(const PlanSpace& space, const SearchResult& r) {
  const Evaluation& ev = r.eval;
  const int at = space.call_index("actor_train"), ct = space.call_index("critic_train");
  // Calls with the same mesh and strategy share one entry: "ref+rw d8".
  std::vector<std::pair<std::string, std::string>> parts;  // (names, strategy) in call order
  std::vector<std::pair<int, std::string>> keys;           // (mesh, strategy) of each part
  for (std::size_t c = 0; c < space.calls().size(); ++c) {
    if (ev.intra.used && (static_cast<int>(c) == at || static_cast<int>(c) == ct)) continue;
    const Choice& ch = r.plan[c];
    const Entry& e = space.entries(static_cast<int>(c), ch.mesh)[static_cast<std::size_t>(ch.entry)];
    const std::string st = e.strategy.compact();
    bool merged = false;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (keys[k].first == ch.mesh && keys[k].second == st) {
        parts[k].first += "+" + short_name(space.calls()[c].name);
        merged = true;
      }
    }
    if (!merged) {
      keys.push_back({ch.mesh, st});
      parts.push_back({short_name(space.calls()[c].name), st});
    }
  }
  std::string out;
  for (const auto& [names, st] : parts) out += (out.empty() ? "" : " | ") + names + " " + st;
  if (ev.intra.used) {
    auto st = [&](int c) {
      const Choice& ch = r.plan[static_cast<std::size_t>(c)];
      return space.entries(c, ch.mesh)[static_cast<std::size_t>(ch.entry)].strategy.compact();
    };
    out += fmt::format(" | train fused {}/{}", st(at), st(ct));
  }
  if (ev.inter.used) {
    out += fmt::format(" | R_t {:.0f}% m {}", 100.0 * ev.inter.r_t / space.cost_model().experiment().global_batch,
                       ev.inter.m);
  }
  out += fmt::format(" | iter {:.1f} s (serial {:.1f} s)", ev.time, ev.serial);
  if (ev.oom) out += " | OOM";
  return out;
}

}  // namespace braid::plan
