#include "plan/profile.hpp"

#include <fmt/format.h>

#include "core/made_from.hpp"

namespace braid::plan {
namespace {

// bs_max: a decode batch, in sequences (at most 2^31 - 1, as lengths).
constexpr double kMaxBatch = 2147483647.0;

ordered_json link_json(const LinkCosts& l) {
  return {{"gbs", l.bandwidth / 1e9}, {"latency_us", l.latency * 1e6}};
}

LinkCosts link_from(const json& j, Checker& c, const std::string& where) {
  LinkCosts l;
  c.no_unknown_keys(j, where, {"gbs", "latency_us"});
  l.bandwidth = c.number(j, where, "gbs", {.min = 0, .max = kMaxGbs, .exclusive_min = true}).value_or(1) * 1e9;
  l.latency = c.number(j, where, "latency_us", {.min = 0, .max = kMaxLatencyUs}).value_or(0) * 1e-6;
  return l;
}


// A measured profile's spreads: (max - min) / median per table, the repeats and what the
// statistic is (shown, not planned with; read so that a damaged one is named).
json spread_from(const json& j, Checker& c, const std::string& where) {
  c.no_unknown_keys(j, where, {"layer_fwd", "layer_bwd", "layer_prefill", "head", "layer_decode", "sample", "repeats",
                               "statistic"});
  for (const char* key : {"layer_fwd", "layer_bwd", "layer_prefill", "head", "layer_decode", "sample"}) {
    c.number(j, where, key, {.min = 0}, 0.0);
  }
  c.integer(j, where, "repeats", {.min = 1, .max = 1000});
  c.string(j, where, "statistic", {}, "");
  return j;
}

}  // namespace

const ModelProfile* Profile::find(const ModelShape& s) const {
  for (const auto& m : models) {
    if (m.shape.same_as(s)) return &m;
  }
  return nullptr;
}

double find_bs_max(const Table2& t, double tolerance) {
  if (t.x.empty() || t.y.empty()) return 1;
  const double base = t.cell(0, 0);
  double best = t.x.front();
  for (std::size_t i = 0; i < t.x.size(); ++i) {
    if (t.cell(i, 0) <= base * (1 + tolerance)) best = t.x[i];
  }
  return best;
}

ordered_json profile_to_json(const Profile& p) {
  ordered_json j;
  j["format"] = "braid.profile";
  j["version"] = kProfileVersion;
  j["source"] = p.source;
  j["hardware"] = hardware_to_json(p.hardware);
  j["comm"] = {{"p2p_intra", link_json(p.comm.p2p_intra)},
               {"p2p_inter", link_json(p.comm.p2p_inter)},
               {"allreduce_intra", link_json(p.comm.allreduce_intra)},
               {"allreduce_inter", link_json(p.comm.allreduce_inter)}};
  ordered_json models = ordered_json::array();
  for (const auto& m : p.models) {
    ordered_json e;
    e["name"] = m.name;
    e["shape"] = shape_to_hf_json(m.shape);
    e["bs_max"] = m.bs_max;
    const auto& mem = m.memory;
    e["memory_bytes"] = {{"layer_weights", mem.weights},        {"layer_gradients", mem.gradients},
                         {"layer_optimizer", mem.optimizer},    {"act_per_token_layer", mem.act_per_token},
                         {"kv_per_token_layer", mem.kv_per_token}, {"embedding_weights", mem.embedding_weights},
                         {"head_weights", mem.head_weights}};
    e["layer_fwd"] = table_to_json(m.layer_fwd, "tokens", "seq_len");
    e["layer_bwd"] = table_to_json(m.layer_bwd, "tokens", "seq_len");
    if (!m.layer_prefill.v.empty()) e["layer_prefill"] = table_to_json(m.layer_prefill, "tokens", "seq_len");
    e["embedding_fwd"] = table_to_json(m.embed_fwd, "tokens");
    e["embedding_bwd"] = table_to_json(m.embed_bwd, "tokens");
    e["head_fwd"] = table_to_json(m.head_fwd, "tokens");
    e["head_bwd"] = table_to_json(m.head_bwd, "tokens");
    e["layer_decode"] = table_to_json(m.layer_decode, "batch", "kv_len");
    if (!m.sample.v.empty()) e["sample"] = table_to_json(m.sample, "rows");
    const auto& x = m.train_extra;
    if (x.micro > 0 || x.token > 0 || x.step > 0) {
      e["train_extra"] = {{"micro_ms", x.micro * 1e3}, {"token_us", x.token * 1e6}, {"step_ms", x.step * 1e3}};
    }
    if (!m.spread.is_null()) e["spread"] = m.spread;
    models.push_back(std::move(e));
  }
  j["models"] = std::move(models);
  if (p.host.measured()) j["host"] = host_to_json(p.host);
  return j;
}

Profile profile_from_json(const json& doc, const std::string& file) {
  Checker c(file);
  Profile p;
  c.format(doc, "braid.profile", kProfileVersion);
  c.no_unknown_keys(doc, "", {"format", "version", "source", "hardware", "comm", "models", "host", "made_from"});
  if (doc.is_object() && doc.contains("made_from")) {   // what made it (core/made_from.hpp)
    if (auto why = made_from_problem(ordered_json::parse(doc["made_from"].dump()))) c.fail("made_from", *why);
  }
  p.source = c.string(doc, "", "source", {"analytic", "calibrated", "measured"}).value_or("analytic");
  p.hardware = hardware_from_json(c.object(doc, "", "hardware"), c, "hardware", /*written=*/true);
  const json& comm = c.object(doc, "", "comm");
  c.no_unknown_keys(comm, "comm", {"p2p_intra", "p2p_inter", "allreduce_intra", "allreduce_inter"});
  p.comm.p2p_intra = link_from(c.object(comm, "comm", "p2p_intra"), c, "comm.p2p_intra");
  p.comm.p2p_inter = link_from(c.object(comm, "comm", "p2p_inter"), c, "comm.p2p_inter");
  p.comm.allreduce_intra = link_from(c.object(comm, "comm", "allreduce_intra"), c, "comm.allreduce_intra");
  p.comm.allreduce_inter = link_from(c.object(comm, "comm", "allreduce_inter"), c, "comm.allreduce_inter");
  for (const auto& [w, e] : c.array_items(doc, "", "models", 1)) {
    ModelProfile m;
    c.no_unknown_keys(*e, w, {"name", "shape", "bs_max", "memory_bytes", "layer_fwd", "layer_bwd", "layer_prefill", "embedding_fwd",
                              "embedding_bwd", "head_fwd", "head_bwd", "layer_decode", "sample", "spread", "train_extra"});
    m.name = c.string(*e, w, "name").value_or("");
    const json& shape = c.object(*e, w, "shape");
    m.shape = shape_from_hf_config(shape, c, Checker::path(w, "shape"));
    m.shape.value_head = c.boolean(shape, Checker::path(w, "shape"), "value_head", false).value_or(false);
    m.shape.name = m.name;
    m.bs_max = c.number(*e, w, "bs_max", {.min = 1, .max = kMaxBatch}).value_or(1);
    const std::string mw = Checker::path(w, "memory_bytes");
    const json& mem = c.object(*e, w, "memory_bytes");
    const Bounds nonneg{.min = 0};
    m.memory.weights = c.number(mem, mw, "layer_weights", nonneg).value_or(0);
    m.memory.gradients = c.number(mem, mw, "layer_gradients", nonneg).value_or(0);
    m.memory.optimizer = c.number(mem, mw, "layer_optimizer", nonneg).value_or(0);
    m.memory.act_per_token = c.number(mem, mw, "act_per_token_layer", nonneg).value_or(0);
    m.memory.kv_per_token = c.number(mem, mw, "kv_per_token_layer", nonneg).value_or(0);
    m.memory.embedding_weights = c.number(mem, mw, "embedding_weights", nonneg).value_or(0);
    m.memory.head_weights = c.number(mem, mw, "head_weights", nonneg).value_or(0);
    // Init-captures, not the structured bindings themselves: clang before 16 cannot capture those.
    auto t2 = [&c, e = e, w = w](const char* key, const char* xn, const char* yn) {
      return table2_from_json(c.object(*e, w, key), c, Checker::path(w, key), xn, yn);
    };
    auto t1 = [&c, e = e, w = w](const char* key) {
      return table1_from_json(c.object(*e, w, key), c, Checker::path(w, key), "tokens");
    };
    m.layer_fwd = t2("layer_fwd", "tokens", "seq_len");
    m.layer_bwd = t2("layer_bwd", "tokens", "seq_len");
    if (e->contains("layer_prefill")) m.layer_prefill = t2("layer_prefill", "tokens", "seq_len");
    m.layer_decode = t2("layer_decode", "batch", "kv_len");
    m.embed_fwd = t1("embedding_fwd");
    m.embed_bwd = t1("embedding_bwd");
    m.head_fwd = t1("head_fwd");
    m.head_bwd = t1("head_bwd");
    if (e->contains("sample")) m.sample = table1_from_json(c.object(*e, w, "sample"), c, Checker::path(w, "sample"), "rows");
    if (e->contains("spread")) m.spread = spread_from(c.object(*e, w, "spread"), c, Checker::path(w, "spread"));
    if (e->contains("train_extra")) {
      const std::string xw = Checker::path(w, "train_extra");
      const json& x = c.object(*e, w, "train_extra");
      c.no_unknown_keys(x, xw, {"micro_ms", "token_us", "step_ms"});
      m.train_extra.micro = c.number(x, xw, "micro_ms", nonneg).value_or(0) / 1e3;
      m.train_extra.token = c.number(x, xw, "token_us", nonneg).value_or(0) / 1e6;
      m.train_extra.step = c.number(x, xw, "step_ms", nonneg).value_or(0) / 1e3;
    }
    p.models.push_back(std::move(m));
  }
  if (doc.is_object() && doc.contains("host")) p.host = host_from_json(c.object(doc, "", "host"), c, "host");
  c.check();
  return p;
}

Profile load_profile(const std::string& file) { return profile_from_json(load_json_file(file), file); }

}  // namespace braid::plan
