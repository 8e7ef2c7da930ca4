#include "sched/schedule_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "core/made_from.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/option_schema.hpp"

namespace braid::sched {
namespace {

ordered_json subtask_fields(const Problem& p, std::int32_t task) {
  const auto t = static_cast<std::size_t>(task);
  ordered_json j;
  j["model"] = p.spec.models[static_cast<std::size_t>(p.model[t])].name;
  j["replica"] = p.replica[t];
  j["micro_batch"] = p.micro_batch[t];
  j["stage"] = p.stage[t];
  j["kind"] = p.kind[t] == Kind::F ? "F" : "B";
  return j;
}

}  // namespace

ordered_json spec_to_json(const SchedSpec& spec) {
  ordered_json j;
  j["format"] = "braid.schedspec";
  j["version"] = 1;
  j["devices"] = spec.devices;
  j["models"] = ordered_json::array();
  for (const auto& m : spec.models) {
    ordered_json mj;
    mj["name"] = m.name;
    mj["stages"] = m.stages;  // after any tp merge
    mj["replicas"] = m.replicas;
    mj["micro_batches"] = m.micro_batches;
    mj["fwd"] = m.fwd;
    mj["bwd"] = m.bwd;
    mj["act_mem"] = m.act_mem;
    mj["direction"] = m.forward ? "forward" : "reverse";
    j["models"].push_back(mj);
  }
  j["mem_capacity"] = spec.mem_capacity ? ordered_json(*spec.mem_capacity) : ordered_json(nullptr);
  j["p2p_time"] = spec.p2p_time;
  return j;
}

ordered_json schedule_to_json(const Problem& p, const Order& order, const Timing& timing, const Lowered& lowered,
                              const ScheduleSummary& summary) {
  ordered_json doc;
  doc["format"] = "braid.schedule";
  doc["version"] = kScheduleVersion;
  doc["makespan"] = timing.makespan;
  doc["lower_bound"] = summary.lower_bound;
  doc["lower_bound_reached"] = same_time(timing.makespan, summary.lower_bound);
  doc["lower_bound_binding"] = summary.lower_bound_binding;
  doc["peak_memory"] = timing.peak_memory;
  doc["speedup_over_serial_1f1b"] = summary.serial_makespan / timing.makespan;
  doc["memory_over_serial_1f1b"] = summary.serial_peak > 0 ? ordered_json(timing.peak_memory / summary.serial_peak) : ordered_json(nullptr);
  doc["baselines"]["serial_1f1b"] = {{"makespan", summary.serial_makespan}, {"peak_memory", summary.serial_peak}};
  doc["baselines"]["greedy"] = {{"makespan", summary.greedy_makespan}, {"peak_memory", summary.greedy_peak}};
  if (!summary.search.is_null()) doc["search"] = summary.search;
  doc["spec"] = spec_to_json(p.spec);
  doc["devices"] = ordered_json::array();
  for (int d = 0; d < p.devices; ++d) {
    ordered_json dj;
    dj["device"] = d;
    dj["peak_memory"] = timing.device_peak[static_cast<std::size_t>(d)];
    dj["subtasks"] = ordered_json::array();
    for (int i = 0; i < p.per_device; ++i) {
      const std::int32_t t = order[static_cast<std::size_t>(d * p.per_device + i)];
      ordered_json sj = subtask_fields(p, t);
      sj["start"] = timing.start[static_cast<std::size_t>(t)];
      sj["end"] = timing.end[static_cast<std::size_t>(t)];
      dj["subtasks"].push_back(std::move(sj));
    }
    dj["instructions"] = ordered_json::array();
    for (const Instr& in : lowered.streams[static_cast<std::size_t>(d)]) {
      ordered_json ij;
      ij["op"] = op_name(in.op);
      ordered_json f = subtask_fields(p, in.task);
      for (auto it = f.begin(); it != f.end(); ++it) {
        if (it.key() != "kind") ij[it.key()] = it.value();
      }
      if (in.peer >= 0) {
        ij["peer"] = in.peer;
        ij["buffer"] = in.buffer;
      }
      dj["instructions"].push_back(std::move(ij));
    }
    dj["buffers"] = ordered_json::array();
    const auto& counts = lowered.buffers[static_cast<std::size_t>(d)];
    for (std::size_t q = 0; q < counts.size(); ++q) {
      if (counts[q] == 0) continue;
      dj["buffers"].push_back({{"model", p.spec.models[q / 2].name}, {"kind", q % 2 == 0 ? "F" : "B"}, {"count", counts[q]}});
    }
    doc["devices"].push_back(std::move(dj));
  }
  return doc;
}

ScheduleSummary reference_summary(const Problem& p) {
  ScheduleSummary s;
  const LowerBound lb = lower_bound(p);
  s.lower_bound = lb.value;
  s.lower_bound_binding = lb.binding;
  const BaselineResult serial = serial_1f1b(p.spec);
  s.serial_makespan = serial.makespan;
  s.serial_peak = serial.peak_memory;
  const auto g = greedy(p);
  const Timing t = evaluate(p, g ? *g : one_f_one_b(p));
  s.greedy_makespan = t.makespan;
  s.greedy_peak = t.peak_memory;
  return s;
}

namespace {

// The keys of a schedule's "search" record (braid-schedgen's run_schedgen): each optional,
// of its type and within the bounds braid-schedgen's options and counts have; and
// "anneal", the knobs the run used, checked as a spec's "anneal" block is.
enum class RecordType { count, number, flag, text };
struct RecordKey {
  const char* key;
  RecordType type;
  Bounds bounds = {};
  std::vector<std::string> allowed = {};
  bool nullable = false;
};

const std::vector<RecordKey>& record_keys() {
  using T = RecordType;
  const Bounds count{.min = 0, .max = kMaxSearchCount};
  const Bounds seconds{.min = 0, .max = kMaxSeconds};
  static const std::vector<RecordKey> keys = {
      {"ranks", T::count, {.min = 1, .max = 1 << 20}},
      {"winner_rank", T::count, count},
      {"ranks_at_bound", T::count, count},
      {"ranks_stopped_by_peer", T::count, count},
      {"schedules_adopted", T::count, count},
      {"seconds_to_best", T::number, seconds},
      {"rounds", T::count, count},
      {"plateau_moves", T::count, count},
      {"tie_refused", T::count, count},
      {"latency_makespan", T::number, {.min = 0, .exclusive_min = true}},
      {"latency_peak_memory", T::number, {.min = 0}},
      {"mem_candidates", T::count, {.min = 1, .max = 2}},
      {"mem_iterations", T::count, count},
      {"mem_seconds", T::number, seconds},
      {"mem_passes", T::count, count},
      {"mem_devices_lowered", T::count, count},
      {"mem_exact_nodes", T::count, count},
      {"mem_exact_levels", T::count, count},
      {"iterations", T::count, count},
      {"seconds", T::number, seconds},
      {"seed", T::count, count},
      {"start", T::text, {}, {"both", "greedy", "1f1b"}},
      {"preset", T::text, {}, preset_names()},
      {"start_used", T::text, {}, {"greedy", "1f1b"}},
      {"seconds_to_bound", T::number, seconds, {}, true},
      {"iterations_to_bound", T::count, count, {}, true},
      {"time_limit", T::number, seconds},
      {"iterations_limit", T::count, count},
      {"dry_run_makespan", T::number, {.min = 0}},
  };
  return keys;
}

// Checks the search record; returns its numbers (counts as doubles) by key, for the checks
// between them.
std::map<std::string, double> read_search_record(Checker& c, const json& search) {
  std::map<std::string, double> out;
  if (!search.is_object() || search.empty()) {
    c.fail("search", "expected an object (how the schedule was found), found " +
                         (search.is_object() ? std::string("an empty one: leave the key out") : std::string(search.type_name())));
    return out;
  }
  std::vector<std::string> known = {"anneal"};
  for (const RecordKey& k : record_keys()) known.emplace_back(k.key);
  c.no_unknown_keys(search, "search", known);
  if (search.contains("anneal")) check_anneal_block(c, c.object(search, "search", "anneal"), "search.anneal");
  for (const RecordKey& k : record_keys()) {
    const auto it = search.find(k.key);
    if (it == search.end() || (k.nullable && it->is_null())) continue;
    switch (k.type) {
      case RecordType::count:
        if (auto v = c.integer(search, "search", k.key, k.bounds)) out[k.key] = static_cast<double>(*v);
        break;
      case RecordType::number:
        if (auto v = c.number(search, "search", k.key, k.bounds)) out[k.key] = *v;
        break;
      case RecordType::flag:
        c.boolean(search, "search", k.key);
        break;
      case RecordType::text:
        c.string(search, "search", k.key, k.allowed);
        break;
    }
  }
  return out;
}

// "actor replica 0 micro_batch 3 stage 1 F": a subtask as a message names it.
std::string subtask_name(const Problem& p, std::int32_t t) {
  const auto i = static_cast<std::size_t>(t);
  return fmt::format("{} replica {} micro_batch {} stage {} {}", p.spec.models[static_cast<std::size_t>(p.model[i])].name,
                     p.replica[i], p.micro_batch[i], p.stage[i], p.kind[i] == Kind::F ? "F" : "B");
}

// The subtask a subtask or instruction entry names, or -1 (each problem recorded).
std::int32_t read_task(Checker& c, const Problem& p, const json& item, const std::string& where,
                       const std::vector<std::string>& model_names, std::optional<Kind> kind) {
  const auto name = c.string(item, where, "model", model_names);
  const auto r = c.integer(item, where, "replica", {.min = 0});
  const auto j = c.integer(item, where, "micro_batch", {.min = 0});
  const auto s = c.integer(item, where, "stage", {.min = 0});
  if (!kind) {
    if (const auto k = c.string(item, where, "kind", {"F", "B"})) kind = *k == "F" ? Kind::F : Kind::B;
  }
  if (!name || !r || !j || !s || !kind) return -1;
  const int m = static_cast<int>(std::find(model_names.begin(), model_names.end(), *name) - model_names.begin());
  const auto& ms = p.spec.models[static_cast<std::size_t>(m)];
  if (*r >= ms.replicas || *j >= ms.micro_batches || *s >= ms.stages) {
    c.fail(where, fmt::format("replica {}, micro_batch {} or stage {} out of range for {} ({} replicas, {} micro-batches, "
                              "{} stages)",
                              *r, *j, *s, *name, ms.replicas, ms.micro_batches, ms.stages));
    return -1;
  }
  return p.task_id(m, static_cast<int>(*r), static_cast<int>(*s), static_cast<int>(*j), *kind);
}

// The most activation memory device d can hold under any order: every forward's at once.
double most_memory(const Problem& p) {
  double most = 0;
  for (int d = 0; d < p.devices; ++d) {
    double all = 0;
    for (int i = 0; i < p.per_device; ++i) all += std::max(0.0, p.mem_delta[static_cast<std::size_t>(d * p.per_device + i)]);
    most = std::max(most, all);
  }
  return most;
}

// A recorded figure against the one the schedule's spec and order give.
void same_figure(Checker& c, const json& obj, std::string_view where, const char* key, double now, bool required,
                 const char* what) {
  const auto v = c.number(obj, where, key, {.min = 0}, required ? std::nullopt : std::optional<double>(now));
  if (v && !same_time(*v, now)) {
    c.fail(Checker::path(where, key), fmt::format("is {:.9g}, but {} is {:.9g}", *v, what, now));
  }
}

}  // namespace

LoadedSchedule load_schedule(const json& doc, const std::string& origin) {
  Checker c(origin);
  c.format(doc, "braid.schedule", kScheduleVersion);
  c.check();
  c.no_unknown_keys(doc, "", {"format", "version", "makespan", "lower_bound", "lower_bound_reached",
                              "lower_bound_binding", "peak_memory", "speedup_over_serial_1f1b",
                              "memory_over_serial_1f1b", "baselines", "search", "spec", "devices", "made_from"});
  const auto spec_it = doc.find("spec");
  if (spec_it == doc.end()) throw InputError(origin, "spec", "missing (required)");
  LoadedSchedule out{build_problem(schedspec_from_json(*spec_it, origin, "spec", true)), {}, 0};
  const Problem& p = out.problem;
  const auto makespan = c.number(doc, "", "makespan", {.min = 0, .exclusive_min = true});
  out.makespan = makespan.value_or(0);
  std::vector<std::string> model_names;
  for (const auto& m : p.spec.models) model_names.push_back(m.name);

  // Per device: its subtasks (the order), the instruction streams and buffers.
  Order order(static_cast<std::size_t>(p.num_tasks), -1);
  std::vector<std::string> task_at(static_cast<std::size_t>(p.num_tasks));  // where each subtask is listed
  std::vector<std::pair<std::string, const json*>> subtask_items(static_cast<std::size_t>(p.num_tasks));
  out.lowered.streams.assign(static_cast<std::size_t>(p.devices), {});
  out.lowered.buffers.assign(static_cast<std::size_t>(p.devices), std::vector<int>(2 * model_names.size(), 0));
  const auto items = c.array_items(doc, "", "devices", static_cast<std::size_t>(p.devices));
  if (items.size() != static_cast<std::size_t>(p.devices)) {
    c.fail("devices", fmt::format("has {} entries, the spec {} devices", items.size(), p.devices));
  }
  for (std::size_t d = 0; d < items.size() && d < static_cast<std::size_t>(p.devices); ++d) {
    const auto& [where, dev] = items[d];
    c.no_unknown_keys(*dev, where, {"device", "peak_memory", "subtasks", "instructions", "buffers"});
    if (const auto id = c.integer(*dev, where, "device", {.min = 0}); id && *id != static_cast<std::int64_t>(d)) {
      c.fail(Checker::path(where, "device"), fmt::format("is {}, but this is entry {} of devices", *id, d));
    }
    for (auto [bw, buf] : c.array_items(*dev, where, "buffers")) {
      c.no_unknown_keys(*buf, bw, {"model", "kind", "count"});
      const auto name = c.string(*buf, bw, "model", model_names);
      const auto kind = c.string(*buf, bw, "kind", {"F", "B"});
      const auto count = c.integer(*buf, bw, "count", {.min = 0, .max = 1 << 30});
      if (!name || !kind || !count) continue;
      const auto m = static_cast<std::size_t>(std::find(model_names.begin(), model_names.end(), *name) - model_names.begin());
      out.lowered.buffers[d][2 * m + (*kind == "B" ? 1 : 0)] = static_cast<int>(*count);
    }
    std::vector<std::int32_t> computed;  // the F and B of the stream, in its order
    for (auto [iw, ins] : c.array_items(*dev, where, "instructions")) {
      c.no_unknown_keys(*ins, iw, {"op", "model", "replica", "micro_batch", "stage", "peer", "buffer"});
      const auto op_text = c.string(*ins, iw, "op", {"RECV_F", "F", "SEND_F", "RECV_B", "B", "SEND_B"});
      if (!op_text) continue;
      Op op{};
      parse_op(*op_text, &op);
      const bool is_b = op == Op::RECV_B || op == Op::B || op == Op::SEND_B;
      const std::int32_t task = read_task(c, p, *ins, iw, model_names, is_b ? Kind::B : Kind::F);
      if (task < 0) continue;
      Instr in{op, task, -1, -1};
      if (op != Op::F && op != Op::B) {
        in.peer = static_cast<std::int32_t>(c.integer(*ins, iw, "peer", {.min = 0, .max = p.devices - 1}).value_or(0));
        in.buffer = static_cast<std::int32_t>(c.integer(*ins, iw, "buffer", {.min = 0, .max = 1 << 30}).value_or(0));
      } else {
        computed.push_back(task);
        for (const char* key : {"peer", "buffer"}) {
          if (ins->contains(key)) c.fail(Checker::path(iw, key), fmt::format("a {} has no {}", *op_text, key));
        }
      }
      out.lowered.streams[d].push_back(in);
    }
    const auto subtasks = c.array_items(*dev, where, "subtasks");
    const std::string sw = Checker::path(where, "subtasks");
    if (subtasks.size() != static_cast<std::size_t>(p.per_device) && dev->contains("subtasks")) {
      c.fail(sw, fmt::format("has {} entries, but device {} runs {} subtasks of the spec", subtasks.size(), d,
                             p.per_device));
    }
    for (std::size_t i = 0; i < subtasks.size(); ++i) {
      const auto& [tw, st] = subtasks[i];
      c.no_unknown_keys(*st, tw, {"model", "replica", "micro_batch", "stage", "kind", "start", "end"});
      c.number(*st, tw, "start", {.min = 0});
      c.number(*st, tw, "end", {.min = 0});
      const std::int32_t t = read_task(c, p, *st, tw, model_names, std::nullopt);
      if (t < 0) continue;
      const auto ti = static_cast<std::size_t>(t);
      if (p.device[ti] != static_cast<std::int32_t>(d)) {
        c.fail(tw, fmt::format("is {}, a subtask of device {}, not {}", subtask_name(p, t), p.device[ti], d));
        continue;
      }
      if (!task_at[ti].empty()) {
        c.fail(tw, fmt::format("is {} again (first at {})", subtask_name(p, t), task_at[ti]));
        continue;
      }
      task_at[ti] = tw;
      subtask_items[ti] = {tw, st};
      if (i < static_cast<std::size_t>(p.per_device)) order[d * static_cast<std::size_t>(p.per_device) + i] = t;
      if (subtasks.size() == computed.size() && computed[i] != t) {
        c.fail(tw, fmt::format("is {}, but the instructions compute {} at this place", subtask_name(p, t),
                               subtask_name(p, computed[i])));
      }
    }
    if (computed.size() != static_cast<std::size_t>(p.per_device) && dev->contains("instructions")) {
      c.fail(Checker::path(where, "instructions"),
             fmt::format("compute {} subtasks (F and B), but device {} runs {}", computed.size(), d, p.per_device));
    }
  }
  c.check();

  // What the order gives: every subtask's times, the peaks, the makespan.
  const Timing timing = evaluate(p, order);
  if (!timing.valid) throw InputError(origin, "devices", "the subtasks in this order cannot run: " + timing.problem);
  for (std::size_t t = 0; t < subtask_items.size(); ++t) {
    const auto& [tw, st] = subtask_items[t];
    same_figure(c, *st, tw, "start", timing.start[t], true, "its start in this order");
    same_figure(c, *st, tw, "end", timing.end[t], true, "its end in this order");
  }
  for (std::size_t d = 0; d < items.size(); ++d) {
    same_figure(c, *items[d].second, items[d].first, "peak_memory", timing.device_peak[d], true,
                "the device's peak in this order");
  }
  if (makespan && !same_time(*makespan, timing.makespan)) {
    c.fail("makespan", fmt::format("is {:.9g}, but the subtasks in this order end at {:.9g}", *makespan, timing.makespan));
  }
  same_figure(c, doc, "", "peak_memory", timing.peak_memory, true, "the highest device peak in this order");

  // What the spec alone gives: the bound and the baselines (the record of the search may be
  // left out, but what it holds must be what the spec gives).
  const ScheduleSummary ref = reference_summary(p);
  same_figure(c, doc, "", "lower_bound", ref.lower_bound, true, "the spec's lower bound");
  if (doc.contains("lower_bound_reached")) {
    const bool reached = same_time(timing.makespan, ref.lower_bound);
    if (auto v = c.boolean(doc, "", "lower_bound_reached"); v && *v != reached) {
      c.fail("lower_bound_reached", fmt::format("is {}, but the makespan {:.9g} is {} the bound {:.9g}", *v, timing.makespan,
                                                reached ? "at" : "above", ref.lower_bound));
    }
  }
  if (doc.contains("lower_bound_binding")) {
    if (auto v = c.string(doc, "", "lower_bound_binding", {"per_device", "critical_path", "average_work"});
        v && *v != ref.lower_bound_binding) {
      c.fail("lower_bound_binding", fmt::format("is {}, but the spec's bound is bound by {}", *v, ref.lower_bound_binding));
    }
  }
  same_figure(c, doc, "", "speedup_over_serial_1f1b", ref.serial_makespan / timing.makespan, false,
              "serial 1F1B's makespan over this one");
  if (doc.contains("memory_over_serial_1f1b")) {
    if (ref.serial_peak > 0) {
      same_figure(c, doc, "", "memory_over_serial_1f1b", timing.peak_memory / ref.serial_peak, true,
                  "this peak over serial 1F1B's");
    } else if (!doc["memory_over_serial_1f1b"].is_null()) {
      c.fail("memory_over_serial_1f1b", "must be null: serial 1F1B holds no activation memory");
    }
  }
  if (doc.contains("baselines")) {
    const json& b = doc["baselines"];
    if (!b.is_object() || b.empty()) {
      c.fail("baselines", "expected an object, found " + (b.is_object() ? std::string("an empty one") : std::string(b.type_name())));
    } else {
      c.no_unknown_keys(b, "baselines", {"serial_1f1b", "greedy"});
      const struct {
        const char* name;
        double makespan, peak;
        const char* what;
      } baselines[] = {{"serial_1f1b", ref.serial_makespan, ref.serial_peak, "serial 1F1B's"},
                       {"greedy", ref.greedy_makespan, ref.greedy_peak, "greedy fusion's"}};
      for (const auto& base : baselines) {
        if (!b.contains(base.name)) continue;
        const std::string w = Checker::path("baselines", base.name);
        const json& one = b[base.name];
        if (!one.is_object() || one.empty()) {
          c.fail(w, "expected an object, found " + (one.is_object() ? std::string("an empty one") : std::string(one.type_name())));
          continue;
        }
        c.no_unknown_keys(one, w, {"makespan", "peak_memory"});
        same_figure(c, one, w, "makespan", base.makespan, false, fmt::format("{} makespan", base.what).c_str());
        same_figure(c, one, w, "peak_memory", base.peak, false, fmt::format("{} peak", base.what).c_str());
      }
    }
  }
  if (doc.contains("search")) {
    const auto rec = read_search_record(c, doc["search"]);
    const auto has = [&](const char* k) { return rec.count(k) > 0; };
    const double ranks = has("ranks") ? rec.at("ranks") : 1;
    for (const char* k : {"winner_rank", "ranks_at_bound", "ranks_stopped_by_peer"}) {
      const double most = std::string_view(k) == "winner_rank" ? ranks - 1 : ranks;
      if (has(k) && rec.at(k) > most) {
        c.fail(Checker::path("search", k), fmt::format("is {}, more than the {} rank(s) searched allow", rec.at(k), ranks));
      }
    }
    if (has("dry_run_makespan") && !same_time(rec.at("dry_run_makespan"), timing.makespan)) {
      c.fail("search.dry_run_makespan",
             fmt::format("is {:.9g}, but the streams' makespan is {:.9g}", rec.at("dry_run_makespan"), timing.makespan));
    }
    // The latency search's best: no shorter than the final schedule (the memory pass keeps or
    // shortens it), no longer than where it started (greedy fusion or 1F1B model after model).
    if (has("latency_makespan")) {
      const double start = std::max(ref.greedy_makespan, evaluate(p, one_f_one_b(p)).makespan);
      const double v = rec.at("latency_makespan");
      if (!at_most(timing.makespan, v) || !at_most(v, start)) {
        c.fail("search.latency_makespan", fmt::format("is {:.9g}, outside [{:.9g}, {:.9g}]: between this makespan and "
                                                      "the schedules the search starts from",
                                                      v, timing.makespan, start));
      }
    }
    if (has("latency_peak_memory") && !at_most(rec.at("latency_peak_memory"), most_memory(p))) {
      c.fail("search.latency_peak_memory", fmt::format("is {:.9g}, more than the {:.9g} a device holds with every "
                                                       "forward's activations at once",
                                                       rec.at("latency_peak_memory"), most_memory(p)));
    }
    // The first search's time and iterations to the bound: both, or both null (it did not reach it).
    const json& sr = doc["search"];
    if (sr.is_object() && sr.contains("seconds_to_bound") && sr.contains("iterations_to_bound") &&
        sr["seconds_to_bound"].is_null() != sr["iterations_to_bound"].is_null()) {
      const char* null_one = sr["seconds_to_bound"].is_null() ? "seconds_to_bound" : "iterations_to_bound";
      c.fail(Checker::path("search", null_one), "is null, but the other of seconds_to_bound and iterations_to_bound is "
                                                "not: the first search reached the bound or did not");
    }
    if (has("iterations_to_bound") && has("iterations") && rec.at("iterations_to_bound") > rec.at("iterations")) {
      c.fail("search.iterations_to_bound", fmt::format("is {}, more than the search's {} iterations",
                                                       rec.at("iterations_to_bound"), rec.at("iterations")));
    }
  }
  if (doc.contains("made_from")) {
    if (auto why = made_from_problem(ordered_json::parse(doc["made_from"].dump()))) c.fail("made_from", *why);
  }
  c.check();
  return out;
}

LoadedSchedule tile_schedule(const LoadedSchedule& one, int groups) {
  if (groups <= 1) return one;
  SchedSpec spec = one.problem.spec;
  const int d0 = spec.devices;
  spec.devices *= groups;
  for (auto& m : spec.models) m.replicas *= groups;
  LoadedSchedule out{build_problem(spec), {}, one.makespan};
  const std::int32_t task_shift = d0 * one.problem.per_device;
  for (int k = 0; k < groups; ++k) {
    for (int d = 0; d < d0; ++d) {
      std::vector<Instr> stream = one.lowered.streams[static_cast<std::size_t>(d)];
      for (Instr& in : stream) {
        in.task += k * task_shift;
        if (in.peer >= 0) in.peer += k * d0;
      }
      out.lowered.streams.push_back(std::move(stream));
      out.lowered.buffers.push_back(one.lowered.buffers[static_cast<std::size_t>(d)]);
    }
  }
  return out;
}

}  // namespace braid::sched
