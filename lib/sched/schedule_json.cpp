#include "sched/schedule_json.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

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
  doc["search"] = summary.search;
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

LoadedSchedule load_schedule(const json& doc, const std::string& origin) {
  Checker c(origin);
  c.format(doc, "braid.schedule", kScheduleVersion);
  c.check();
  const auto spec_it = doc.find("spec");
  if (spec_it == doc.end()) throw InputError(origin, "spec", "missing (required)");
  LoadedSchedule out{build_problem(parse_schedspec(spec_it->dump(), origin + " (spec)")), {}, 0};
  const Problem& p = out.problem;
  out.makespan = c.number(doc, "", "makespan", {.min = 0}).value_or(0);
  std::vector<std::string> model_names;
  for (const auto& m : p.spec.models) model_names.push_back(m.name);

  out.lowered.streams.assign(static_cast<std::size_t>(p.devices), {});
  out.lowered.buffers.assign(static_cast<std::size_t>(p.devices), std::vector<int>(2 * model_names.size(), 0));
  const auto items = c.array_items(doc, "", "devices", static_cast<std::size_t>(p.devices));
  if (items.size() != static_cast<std::size_t>(p.devices)) {
    c.fail("devices", fmt::format("has {} entries, the spec {} devices", items.size(), p.devices));
  }
  for (std::size_t d = 0; d < items.size() && d < static_cast<std::size_t>(p.devices); ++d) {
    const auto& [where, dev] = items[d];
    for (auto [bw, buf] : c.array_items(*dev, where, "buffers")) {
      const auto name = c.string(*buf, bw, "model", model_names);
      const auto kind = c.string(*buf, bw, "kind", {"F", "B"});
      const auto count = c.integer(*buf, bw, "count", {.min = 0});
      if (!name || !kind || !count) continue;
      const auto m = static_cast<std::size_t>(std::find(model_names.begin(), model_names.end(), *name) - model_names.begin());
      out.lowered.buffers[d][2 * m + (*kind == "B" ? 1 : 0)] = static_cast<int>(*count);
    }
    for (auto [iw, ins] : c.array_items(*dev, where, "instructions")) {
      const auto op_text = c.string(*ins, iw, "op", {"RECV_F", "F", "SEND_F", "RECV_B", "B", "SEND_B"});
      const auto name = c.string(*ins, iw, "model", model_names);
      const auto r = c.integer(*ins, iw, "replica", {.min = 0});
      const auto j = c.integer(*ins, iw, "micro_batch", {.min = 0});
      const auto s = c.integer(*ins, iw, "stage", {.min = 0});
      if (!op_text || !name || !r || !j || !s) continue;
      Op op{};
      parse_op(*op_text, &op);
      const int m = static_cast<int>(std::find(model_names.begin(), model_names.end(), *name) - model_names.begin());
      const auto& ms = p.spec.models[static_cast<std::size_t>(m)];
      if (*r >= ms.replicas || *j >= ms.micro_batches || *s >= ms.stages) {
        c.fail(iw, "replica, micro_batch or stage out of range for the model");
        continue;
      }
      const bool is_b = op == Op::RECV_B || op == Op::B || op == Op::SEND_B;
      Instr in{op, p.task_id(m, static_cast<int>(*r), static_cast<int>(*s), static_cast<int>(*j), is_b ? Kind::B : Kind::F), -1, -1};
      if (op != Op::F && op != Op::B) {
        in.peer = static_cast<std::int32_t>(c.integer(*ins, iw, "peer", {.min = 0, .max = p.devices - 1}).value_or(0));
        in.buffer = static_cast<std::int32_t>(c.integer(*ins, iw, "buffer", {.min = 0}).value_or(0));
      }
      out.lowered.streams[d].push_back(in);
    }
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
