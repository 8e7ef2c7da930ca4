#include "plan/fusion.hpp"

#include "sched/bound.hpp"
#include "sched/problem.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace braid::plan {

std::vector<GenTail> gen_tails(const CostModel& cm, const Mesh& mesh, const Strategy& s, double kv_room) {
  std::vector<GenTail> out;
  const int n = s.dp;
  if (n < 2) return out;
  const GenTimeline g = cm.gen_timeline(mesh, s);
  const int batch = cm.experiment().global_batch;
  const bool spans = mesh.spans_nodes(cm.per_node());
  const double kv_tok = cm.kv_bytes_per_sample_token(s);
  const double longest = cm.mean_prompt() + cm.experiment().response_len.upper();
  const double bs_max = cm.bs_max_per_replica(s);
  const double inter_bw = cm.profile().comm.p2p_inter.bandwidth;
  for (int pct = 5; pct <= 95; pct += 5) {
    const int r_t = std::max(1, batch * pct / 100);
    std::size_t k = 0;
    while (k < g.blocks.size() && g.blocks[k].remaining > r_t) ++k;
    if (k == g.blocks.size()) continue;  // the tail is never that large
    const int m_bs = static_cast<int>(std::ceil(r_t / bs_max));
    const int m_kv = kv_room > 0 ? static_cast<int>(std::ceil(r_t * longest * kv_tok / kv_room)) : n;
    const int m = std::max({1, m_bs, m_kv});
    if (m >= n) continue;
    GenTail t;
    t.r_t = r_t;
    t.m = m;
    const auto& b0 = g.blocks[k];
    // The KV cache of the migrated samples crosses the network, replicas in parallel.
    // Each device of a receiving replica takes its shard of the migrated samples' KV cache.
    const double per_device = static_cast<double>(b0.remaining) / m * (cm.mean_prompt() + b0.step0) * kv_tok;
    t.t_migrate = b0.start + per_device / inter_bw;
    double now = t.t_migrate;
    t.time.push_back(now);
    t.completed.push_back(batch - b0.remaining);
    for (std::size_t j = k; j < g.blocks.size(); ++j) {
      const auto& b = g.blocks[j];
      const double active = std::ceil(static_cast<double>(b.remaining) / m);
      now += b.steps * cm.decode_step(s, spans, active, cm.mean_prompt() + b.step0 + 0.5 * b.steps);
      const int next_remaining = j + 1 < g.blocks.size() ? g.blocks[j + 1].remaining : 0;
      t.time.push_back(now);
      t.completed.push_back(batch - next_remaining);
    }
    t.gen_end = now;
    out.push_back(std::move(t));
  }
  return out;
}

InterFusion best_inter_fusion(const std::vector<GenTail>& tails, double gen_serial, double t_inf, int batch,
                              int replicas) {
  InterFusion best;
  best.replicas = replicas;
  best.serial = gen_serial + t_inf;
  best.fused = best.serial;
  best.gen_end = gen_serial;
  if (t_inf <= 0) return best;
  const double rate = batch / t_inf;  // samples per second on the whole mesh
  for (const auto& t : tails) {
    const double freed = static_cast<double>(replicas - t.m) / replicas;
    // Fluid model: freed devices work through finished samples as they appear.
    double done = 0;
    for (std::size_t k = 1; k < t.time.size(); ++k) {
      const double cap = freed * rate * (t.time[k] - t.time[k - 1]);
      done = std::min(done + cap, static_cast<double>(t.completed[k - 1]));
      done = std::max(done, 0.0);
    }
    const double end = t.gen_end + (batch - done) / rate;
    best.curve.emplace_back(t.r_t, end);
    if (end < best.fused) {
      best.used = true;
      best.fused = end;
      best.r_t = t.r_t;
      best.m = t.m;
      best.gen_end = t.gen_end;
    }
  }
  return best;
}

bool same_schedspec(const json& a, const json& b) {
  // Read by hand from a file braid-meshplan did not check beyond "spec is an object": a key of
  // another type (a string where a number belongs) makes the specs differ, not a JSON type error.
  auto same = [](const json& x, const json& y, const char* key, const json& dflt) {
    const json& vx = x.contains(key) ? x[key] : dflt;
    const json& vy = y.contains(key) ? y[key] : dflt;
    return vx == vy;
  };
  if (!a.is_object() || !b.is_object() || !a.contains("devices") || !same(a, b, "devices", json())) return false;
  const json& ma = a["models"];
  const json& mb = b["models"];
  if (!ma.is_array() || !mb.is_array() || ma.size() != mb.size()) return false;
  auto sum = [](const json& v) -> std::optional<double> {
    if (v.is_number()) return v.get<double>();
    if (!v.is_array()) return std::nullopt;
    double t = 0;
    for (const auto& x : v) {
      if (!x.is_number()) return std::nullopt;
      t += x.get<double>();
    }
    return t;
  };
  for (std::size_t i = 0; i < ma.size(); ++i) {
    const json& x = ma[i];
    const json& y = mb[i];
    if (!x.is_object() || !y.is_object()) return false;
    if (!same(x, y, "name", "") || !same(x, y, "replicas", 1) || !same(x, y, "micro_batches", 0)) return false;
    for (const char* k : {"fwd", "bwd"}) {
      if (!x.contains(k) || !y.contains(k)) return false;
      const auto sx = sum(x[k]), sy = sum(y[k]);
      if (!sx || !sy) return false;
      // Times are in ms, rounded to ns.
      if (std::abs(*sx - *sy) > 1e-5 * std::max(1.0, std::abs(*sx))) return false;
    }
  }
  return true;
}

IntraFusion intra_fusion(const CostModel& cm, const Mesh& mesh, const Strategy& a, const Strategy& c,
                         double serial, double mem_capacity, const KnownSchedule* schedule) {
  IntraFusion f;
  f.serial = serial;
  f.fused = serial;
  const int tp = std::max(a.tp, c.tp);
  // RLHFuse merges s consecutive stages of the model with the smaller tp so
  // both models' stages span the same devices (schedgen does the merge).
  if (a.pp % (tp / a.tp) != 0 || c.pp % (tp / c.tp) != 0) return f;
  // One fused pipeline carries micro-batches of one size for both models (K1·M1 = K2·M2).
  if (a.dp * a.micro != c.dp * c.micro) return f;
  // braid-train's fused pipeline trains no LoRA adapters.
  if (cm.experiment().train.lora_rank > 0) return f;
  // Pipelines sharing a factor split into that many identical fused groups.
  const int g = std::gcd(a.dp, c.dp);
  const int devices = mesh.count / tp / g;
  const Experiment& e = cm.experiment();
  const bool spans = mesh.spans_nodes(cm.per_node());
  auto stages = [&](const char* role, const Strategy& s) {
    const double samples = static_cast<double>(e.mini_batch) / s.dp / s.micro;
    return cm.train_stages(role, s.pp, s.tp, s.dp, spans, samples, s.recompute);
  };
  const auto sta = stages("actor", a);
  const auto stc = stages("critic", c);
  const double p2p = std::max(sta.p2p, stc.p2p);
  const int steps = e.global_batch / e.mini_batch * e.ppo_epochs;

  auto ms = [](const std::vector<double>& v) {
    ordered_json j = ordered_json::array();
    for (double x : v) j.push_back(std::round(x * 1e9) / 1e6);
    return j;
  };
  auto gb = [](const std::vector<double>& v) {
    ordered_json j = ordered_json::array();
    for (double x : v) j.push_back(std::round(x / 1e6) / 1e3);
    return j;
  };
  auto spec_model = [&](const char* name, const Strategy& s, const CostModel::StageTimes& st) {
    return ordered_json{{"name", name},        {"stages", s.pp}, {"replicas", s.dp / g},
                        {"micro_batches", s.micro}, {"tp", s.tp},   {"fwd", ms(st.fwd)},
                        {"bwd", ms(st.bwd)},        {"act_mem", gb(st.act_bytes)}};
  };
  ordered_json spec;
  spec["format"] = "braid.schedspec";
  spec["version"] = 1;
  spec["devices"] = devices;
  spec["models"] = ordered_json::array({spec_model("actor", a, sta), spec_model("critic", c, stc)});
  spec["mem_capacity"] = mem_capacity > 0 ? ordered_json(std::round(mem_capacity / 1e6) / 1e3) : ordered_json(nullptr);
  spec["p2p_time"] = std::round(p2p * 1e9) / 1e6;

  // The bound braid-schedgen reports for this very spec (same stage merge, same subsets).
  const sched::SchedSpec parsed = sched::parse_schedspec(spec.dump(), "the fused training stage's schedspec");
  f.per_step_bound = sched::lower_bound(sched::build_problem(parsed)).value / 1e3;
  f.groups = g;
  double per_step = f.per_step_bound;
  const bool scheduled = schedule != nullptr && same_schedspec(spec, schedule->spec);
  if (scheduled) {
    per_step = schedule->makespan_ms / 1e3;
    f.source = "schedule";
  }
  f.fused = steps * (per_step + sta.sync + stc.sync);
  f.used = f.fused < serial || scheduled;
  if (!f.used) f.fused = serial;
  f.schedspec = std::move(spec);
  return f;
}

}  // namespace braid::plan
