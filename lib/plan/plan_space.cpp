#include "plan/plan_space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"

namespace braid::plan {
namespace {

// Keeps the strategies no other strategy of the same layout (dp, tp, pp) beats
// in both time and active memory: only the micro-batch count differs between
// them, and nothing else in a plan depends on it, so the pruning is exact.
std::vector<Entry> pareto(std::vector<Entry> all) {
  std::vector<Entry> keep;
  for (const auto& a : all) {
    if (!a.estimate.valid) continue;
    bool dominated = false;
    for (const auto& b : all) {
      if (&a == &b || !b.estimate.valid) continue;
      const auto& sa = a.strategy;
      const auto& sb = b.strategy;
      if (sa.dp != sb.dp || sa.tp != sb.tp || sa.pp != sb.pp) continue;
      const bool no_worse = b.estimate.time <= a.estimate.time && b.estimate.active_bytes <= a.estimate.active_bytes;
      const bool better = b.estimate.time < a.estimate.time || b.estimate.active_bytes < a.estimate.active_bytes ||
                          sb.micro < sa.micro;
      if (no_worse && better) {
        dominated = true;
        break;
      }
    }
    if (!dominated) keep.push_back(a);
  }
  return keep;
}

}  // namespace

bool Pin::matches(const Call& c) const {
  return calls == "all" || calls == c.name || calls == kind_name(c.kind);
}

bool Pin::matches(const Strategy& s) const {
  return s.dp == dp && s.tp == tp && s.pp == pp && (micro == 0 || s.micro == micro);
}

Pin parse_pin(const std::string& text) {
  Pin p;
  const auto eq = text.find('=');
  int used = 0;
  const std::string rest = eq == std::string::npos ? "" : text.substr(eq + 1);
  bool ok = eq != std::string::npos && eq > 0 &&
            std::sscanf(rest.c_str(), "d%dt%dp%d%n", &p.dp, &p.tp, &p.pp, &used) == 3 && p.dp > 0 && p.tp > 0 && p.pp > 0;
  if (ok && static_cast<std::size_t>(used) < rest.size()) {
    int more = 0;
    ok = std::sscanf(rest.c_str() + used, "x%d%n", &p.micro, &more) == 1 && p.micro > 0 &&
         static_cast<std::size_t>(used + more) == rest.size();
  }
  if (!ok) {
    throw UsageError(fmt::format("--fix {}: expected NAME=dDtTpP or NAME=dDtTpPxM (NAME a call such as actor_train, "
                                 "a kind: generate, inference, train, or all), e.g. train=d1t2p1",
                                 text));
  }
  p.calls = text.substr(0, eq);
  return p;
}

PlanSpace::PlanSpace(const CostModel& cm, FusionSettings fusion, const std::vector<Pin>& pins)
    : cm_(cm), fusion_(fusion), calls_(dataflow_calls(cm.experiment())) {
  for (const auto& pin : pins) {
    if (std::none_of(calls_.begin(), calls_.end(), [&](const Call& c) { return pin.matches(c); })) {
      std::string names;
      for (const auto& c : calls_) names += (names.empty() ? "" : ", ") + c.name;
      throw UsageError(fmt::format("--fix {}=...: no such call (the calls: {}; or generate, inference, train, all)",
                                   pin.calls, names));
    }
  }
  const Cluster& cl = cm.cluster();
  meshes_ = allowed_meshes(cl.nodes, cl.devices_per_node);
  std::map<int, int> shape_id;
  for (const auto& m : meshes_) {
    auto [it, fresh] = shape_id.emplace(m.count, static_cast<int>(shape_devices_.size()));
    if (fresh) {
      shape_devices_.push_back(m.count);
      meshes_of_shape_.emplace_back();
    }
    shape_of_mesh_.push_back(it->second);
    meshes_of_shape_[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(shape_of_mesh_.size()) - 1);
  }
  for (const auto& call : calls_) {
    std::vector<std::vector<Entry>> per_shape;
    for (std::size_t s = 0; s < shape_devices_.size(); ++s) {
      // Time and memory depend on the mesh's size and whether it spans nodes, which size decides.
      const Mesh rep = meshes_[static_cast<std::size_t>(meshes_of_shape_[s].front())];
      std::vector<Entry> all;
      for (const auto& st : cm.strategies(call, rep.count)) {
        const bool allowed = std::all_of(pins.begin(), pins.end(),
                                         [&](const Pin& p) { return !p.matches(call) || p.matches(st); });
        if (allowed) all.push_back({st, cm.estimate(call, rep, st)});
      }
      per_shape.push_back(pareto(std::move(all)));
    }
    entries_.push_back(std::move(per_shape));
  }
  for (std::size_t c = 0; c < calls_.size(); ++c) {
    std::vector<Choice> opts;
    for (std::size_t m = 0; m < meshes_.size(); ++m) {
      const auto& es = entries_[c][static_cast<std::size_t>(shape_of_mesh_[m])];
      for (std::size_t e = 0; e < es.size(); ++e) opts.push_back({static_cast<int>(m), static_cast<int>(e)});
    }
    if (opts.empty() && std::any_of(pins.begin(), pins.end(), [&](const Pin& p) { return p.matches(calls_[c]); })) {
      throw UsageError(fmt::format("--fix: {} has no such strategy on this cluster (its micro-batches, the model's "
                                   "heads and layers, and the mesh sizes a cluster of {} x {} allows decide)",
                                   calls_[c].name, cm.cluster().nodes, cm.cluster().devices_per_node));
    }
    options_.push_back(std::move(opts));
  }
  // Dataflow: inference reads the generated samples; actor training reads every
  // inference result; critic training reads rewards and values.
  for (const auto& call : calls_) {
    std::vector<int> ps;
    for (std::size_t j = 0; j < calls_.size(); ++j) {
      const Call& o = calls_[j];
      const bool edge =
          (call.kind == CallKind::inference && o.kind == CallKind::generate) ||
          (call.name == "actor_train" && o.kind == CallKind::inference) ||
          (call.name == "critic_train" && (o.name == "reward_inf" || o.name == "critic_inf"));
      if (edge) ps.push_back(static_cast<int>(j));
    }
    parents_.push_back(std::move(ps));
  }
}

const std::vector<Entry>& PlanSpace::entries(int call, int mesh) const {
  return entries_[static_cast<std::size_t>(call)][static_cast<std::size_t>(shape_of_mesh_[static_cast<std::size_t>(mesh)])];
}

double PlanSpace::plan_count() const {
  double n = 1;
  for (const auto& o : options_) n *= static_cast<double>(o.size());
  return n;
}

int PlanSpace::mesh_index(const Mesh& m) const {
  for (std::size_t i = 0; i < meshes_.size(); ++i) {
    if (meshes_[i] == m) return static_cast<int>(i);
  }
  return -1;
}

const std::vector<int>& PlanSpace::meshes_of_size(int devices) const {
  static const std::vector<int> none;
  for (std::size_t s = 0; s < shape_devices_.size(); ++s) {
    if (shape_devices_[s] == devices) return meshes_of_shape_[s];
  }
  return none;
}

int PlanSpace::call_index(const std::string& name) const {
  for (std::size_t i = 0; i < calls_.size(); ++i) {
    if (calls_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const std::vector<GenTail>& PlanSpace::tails(const Plan& plan, double kv_room) const {
  const int g = call_index("actor_gen");
  const Choice& ch = plan[static_cast<std::size_t>(g)];
  const int shape = shape_of_mesh_[static_cast<std::size_t>(ch.mesh)];
  // The KV room enters only through m; bucket it to keep the cache small.
  const long long room_bucket = static_cast<long long>(std::max(0.0, kv_room) / 1e8);
  const long long key = ((static_cast<long long>(shape) * 4096 + ch.entry) << 24) + room_bucket;
  auto it = tails_cache_.find(key);
  if (it != tails_cache_.end()) return it->second;
  const Entry& e = entries(g, ch.mesh)[static_cast<std::size_t>(ch.entry)];
  auto [ins, _] = tails_cache_.emplace(key, gen_tails(cm_, meshes_[static_cast<std::size_t>(ch.mesh)], e.strategy,
                                                      static_cast<double>(room_bucket) * 1e8));
  return ins->second;
}

Evaluation PlanSpace::evaluate(const Plan& plan) const {
  Evaluation ev;
  const std::size_t nc = calls_.size();
  const int devices = cm_.cluster().devices();
  std::vector<const Entry*> entry(nc);
  std::vector<Mesh> mesh(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    mesh[c] = meshes_[static_cast<std::size_t>(plan[c].mesh)];
    entry[c] = &entries(static_cast<int>(c), plan[c].mesh)[static_cast<std::size_t>(plan[c].entry)];
  }
  const int gen = call_index("actor_gen"), atrain = call_index("actor_train");
  const int cinf = call_index("critic_inf"), ctrain = call_index("critic_train");

  // Weight redistribution before a call whose layout differs from the trained one.
  ev.realloc.assign(nc, 0.0);
  std::vector<double> extra_weights(nc, 0.0);
  auto relayout = [&](int use, int train) {
    if (use < 0 || train < 0) return;
    const auto& su = entry[use]->strategy;
    const auto& st = entry[train]->strategy;
    ev.realloc[use] = cm_.realloc_time(calls_[use].role, mesh[train], st, mesh[use], su);
    if (ev.realloc[use] > 0) extra_weights[use] = entry[use]->estimate.layout_weights;
  };
  relayout(gen, atrain);
  relayout(cinf, ctrain);

  // Samples move between calls on different meshes: tokens and a few floats per token.
  const double batch_bytes = cm_.experiment().global_batch * cm_.mean_total() * 16.0;
  ev.call_time.assign(nc, 0.0);
  for (std::size_t c = 0; c < nc; ++c) {
    double data = 0;
    for (int p : parents_[c]) {
      if (!(mesh[p] == mesh[c])) data = std::max(data, batch_bytes / mesh[c].count / cm_.profile().comm.p2p_inter.bandwidth);
    }
    ev.call_time[c] = entry[c]->estimate.time + data;
  }

  // Memory: static (trained models' states, frozen models' weights) + the largest active need.
  std::vector<double> stat(static_cast<std::size_t>(devices), 0.0), active(static_cast<std::size_t>(devices), 0.0);
  for (std::size_t c = 0; c < nc; ++c) {
    const bool resident = calls_[c].kind == CallKind::train || calls_[c].role == "ref" || calls_[c].role == "reward";
    const double a = entry[c]->estimate.active_bytes + extra_weights[c];
    for (int d = mesh[c].first; d < mesh[c].end(); ++d) {
      if (resident) stat[d] += entry[c]->estimate.static_bytes;
      active[d] = std::max(active[d], a);
    }
  }
  for (int d = 0; d < devices; ++d) {
    if (stat[d] + active[d] > ev.peak_memory) {
      ev.peak_memory = stat[d] + active[d];
      ev.peak_device = d;
    }
  }
  const double capacity = cm_.device_memory();
  ev.oom = ev.peak_memory > capacity;

  // Builds the graph with some calls merged into one node, simulates it.
  struct Groups {
    std::vector<int> of_call;
    std::vector<double> duration;
    std::vector<Mesh> mesh;
  };
  auto run = [&](const Groups& g, Breakdown& bd, std::vector<double>* start, std::vector<double>* end,
                 double gen_end_offset) {
    std::vector<SimNode> nodes;
    const int ng = static_cast<int>(g.duration.size());
    for (int i = 0; i < ng; ++i) nodes.push_back({g.duration[i], g.mesh[i], {}});
    for (std::size_t c = 0; c < nc; ++c) {
      if (ev.realloc[c] > 0) {
        // The redistribution has no parent in this iteration: the weights are those of the last update.
        nodes.push_back({ev.realloc[c], mesh[c], {}});
        nodes[g.of_call[c]].parents.push_back(static_cast<int>(nodes.size()) - 1);
      }
      for (int p : parents_[c]) {
        const int pg = g.of_call[p];
        auto& ps = nodes[g.of_call[c]].parents;
        if (pg != g.of_call[c] && std::find(ps.begin(), ps.end(), pg) == ps.end()) ps.push_back(pg);
      }
    }
    const SimResult r = simulate(nodes, devices);
    double gen_start = 0, gen_end = 0, inf_end = 0, train_end = 0;
    for (std::size_t c = 0; c < nc; ++c) {
      const int gi = g.of_call[c];
      if (calls_[c].kind == CallKind::generate) {
        gen_start = r.start[gi];
        gen_end = gen_end_offset > 0 ? r.start[gi] + gen_end_offset : r.end[gi];
      } else if (calls_[c].kind == CallKind::inference) {
        inf_end = std::max(inf_end, r.end[gi]);
      } else {
        train_end = std::max(train_end, r.end[gi]);
      }
      if (start) (*start)[c] = r.start[gi];
      if (end) (*end)[c] = r.end[gi];
    }
    bd.generation = gen_end - gen_start;
    bd.inference = std::max(0.0, inf_end - gen_end);
    bd.training = std::max(0.0, train_end - std::max(inf_end, gen_end));
    bd.other = std::max(0.0, r.makespan - bd.generation - bd.inference - bd.training);
    return r.makespan;
  };

  Groups serial;
  for (std::size_t c = 0; c < nc; ++c) {
    serial.of_call.push_back(static_cast<int>(c));
    serial.duration.push_back(ev.call_time[c]);
    serial.mesh.push_back(mesh[c]);
  }
  ev.call_start.assign(nc, 0.0);
  ev.call_end.assign(nc, 0.0);
  ev.serial = run(serial, ev.serial_breakdown, &ev.call_start, &ev.call_end, 0);

  // Stage fusion: merge what fuses, simulate again.
  Groups fused = serial;
  double gen_end_offset = 0;
  if (fusion_.intra && atrain >= 0 && ctrain >= 0 && mesh[atrain] == mesh[ctrain]) {
    // The bound depends on the two strategies and the mesh's size only.
    const double room = capacity - stat[static_cast<std::size_t>(mesh[atrain].first)];
    const long long key = ((static_cast<long long>(shape_of_mesh_[static_cast<std::size_t>(plan[atrain].mesh)]) * 4096 +
                            plan[atrain].entry) * 4096 + plan[ctrain].entry) * 8192 +
                          static_cast<long long>(std::clamp(room / 1e8, 0.0, 8191.0));
    auto it = intra_cache_.find(key);
    if (it == intra_cache_.end()) {
      it = intra_cache_
               .emplace(key, intra_fusion(cm_, mesh[atrain], entry[atrain]->strategy, entry[ctrain]->strategy,
                                          ev.call_time[atrain] + ev.call_time[ctrain], room,
                                          fusion_.schedule ? &*fusion_.schedule : nullptr))
               .first;
    }
    ev.intra = it->second;
    if (ev.intra.used) {
      fused.of_call[ctrain] = fused.of_call[atrain];
      fused.duration[atrain] = ev.intra.fused;
    }
  }
  if (fusion_.inter && gen >= 0 && entry[gen]->strategy.dp >= 2) {
    std::vector<int> inner;
    for (std::size_t c = 0; c < nc; ++c) {
      if (calls_[c].kind == CallKind::inference && mesh[gen].contains(mesh[c])) inner.push_back(static_cast<int>(c));
    }
    if (!inner.empty()) {
      std::vector<SimNode> sub;
      for (int c : inner) sub.push_back({ev.call_time[c], mesh[c], {}});
      const double t_inf = simulate(sub, devices).makespan;
      double stat_max = 0;
      for (int d = mesh[gen].first; d < mesh[gen].end(); ++d) stat_max = std::max(stat_max, stat[d]);
      const double kv_room = capacity - stat_max - entry[gen]->estimate.layout_weights;
      ev.inter = best_inter_fusion(tails(plan, kv_room), ev.call_time[gen], t_inf,
                                   cm_.experiment().global_batch, entry[gen]->strategy.dp);
      if (ev.inter.used) {
        for (int c : inner) fused.of_call[c] = fused.of_call[gen];
        fused.duration[gen] = ev.inter.fused;
        gen_end_offset = ev.inter.gen_end;
      }
    }
  }
  const bool any_fusion = ev.inter.used || ev.intra.used;
  if (any_fusion) {
    // Renumber the groups that remain.
    std::vector<int> remap(nc, -1);
    Groups g;
    for (std::size_t c = 0; c < nc; ++c) {
      const int old = fused.of_call[c];
      if (remap[old] < 0) {
        remap[old] = static_cast<int>(g.duration.size());
        g.duration.push_back(fused.duration[old]);
        g.mesh.push_back(fused.mesh[old]);
      }
      g.of_call.push_back(remap[old]);
    }
    ev.fused = run(g, ev.fused_breakdown, &ev.call_start, &ev.call_end, gen_end_offset);
  } else {
    ev.fused = ev.serial;
    ev.fused_breakdown = ev.serial_breakdown;
  }
  ev.time = (fusion_.inter || fusion_.intra) ? ev.fused : ev.serial;
  ev.cost = ev.oom ? ev.time * kOomPenalty : ev.time;
  return ev;
}

}  // namespace braid::plan
