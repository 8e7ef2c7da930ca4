#include "plan/hardware.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "core/error.hpp"

namespace braid::plan {
namespace {

constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;

Hardware hopper(std::string name, double hbm_bandwidth, double hbm_capacity) {
  Hardware hw;
  hw.name = std::move(name);
  hw.peak_flops = 989 * kTera;  // dense bf16 tensor cores
  hw.mem_bandwidth = hbm_bandwidth;
  hw.mem_capacity = hbm_capacity;
  hw.devices_per_node = 8;
  hw.intra_bandwidth = 450 * kGiga;  // NVLink 4: 900 GB/s both directions
  hw.inter_bandwidth = 25 * kGiga;   // 200 Gb/s RoCE/IB per GPU, rail-optimised
  hw.intra_latency = 5 * kMicro;
  hw.inter_latency = 15 * kMicro;
  hw.layer_overhead = 30 * kMicro;
  hw.dtype_bytes = 2;
  return hw;
}

}  // namespace

std::vector<std::string> hardware_preset_names() { return {"h100", "h200"}; }

Hardware hardware_preset(std::string_view name) {
  if (name == "h100") return hopper("h100", 3.35e12, 80 * kGiga);
  if (name == "h200") return hopper("h200", 4.8e12, 141 * kGiga);
  throw UsageError(fmt::format("unknown hardware preset \"{}\" (known: h100, h200, or a JSON file)", name));
}

Hardware hardware_from_json(const json& j, Checker& c, std::string_view where, bool written) {
  Hardware hw;
  c.no_unknown_keys(j, where, {"name", "peak_tflops", "mem_bandwidth_gbs", "mem_capacity_gb", "devices_per_node",
                               "intra_node_gbs", "inter_node_gbs", "intra_node_latency_us",
                               "inter_node_latency_us", "layer_overhead_us", "dtype_bytes", "efficiency"});
  // A default, unless the block was written whole (a profile's).
  const auto dflt = [written]<typename T>(T v) { return written ? std::nullopt : std::optional<T>(v); };
  const auto rate = [](double most) { return Bounds{.min = 0, .max = most, .exclusive_min = true}; };
  const Bounds latency{.min = 0, .max = kMaxLatencyUs};
  hw.name = c.string(j, where, "name", {}, dflt(std::string("custom"))).value_or("custom");
  hw.peak_flops = c.number(j, where, "peak_tflops", rate(kMaxTflops)).value_or(1) * kTera;
  hw.mem_bandwidth = c.number(j, where, "mem_bandwidth_gbs", rate(kMaxGbs)).value_or(1) * kGiga;
  hw.mem_capacity = c.number(j, where, "mem_capacity_gb", rate(kMaxMemoryGb)).value_or(1) * kGiga;
  hw.devices_per_node =
      static_cast<int>(c.integer(j, where, "devices_per_node", {.min = 1, .max = 1024}, dflt(std::int64_t{8})).value_or(8));
  hw.intra_bandwidth = c.number(j, where, "intra_node_gbs", rate(kMaxGbs)).value_or(1) * kGiga;
  hw.inter_bandwidth = c.number(j, where, "inter_node_gbs", rate(kMaxGbs)).value_or(1) * kGiga;
  hw.intra_latency = c.number(j, where, "intra_node_latency_us", latency, dflt(5.0)).value_or(5) * kMicro;
  hw.inter_latency = c.number(j, where, "inter_node_latency_us", latency, dflt(15.0)).value_or(15) * kMicro;
  hw.layer_overhead = c.number(j, where, "layer_overhead_us", latency, dflt(0.0)).value_or(0) * kMicro;
  hw.dtype_bytes = static_cast<int>(c.integer(j, where, "dtype_bytes", {.min = 1, .max = 8}, dflt(std::int64_t{2})).value_or(2));
  if (written || (j.is_object() && j.contains("efficiency"))) {
    const std::string ew = Checker::path(where, "efficiency");
    const json& e = c.object(j, where, "efficiency");
    c.no_unknown_keys(e, ew, {"matmul", "memory", "comm"});
    const Bounds frac{.min = 0, .max = 1, .exclusive_min = true};
    hw.eff.matmul = c.number(e, ew, "matmul", frac, dflt(hw.eff.matmul)).value_or(hw.eff.matmul);
    hw.eff.memory = c.number(e, ew, "memory", frac, dflt(hw.eff.memory)).value_or(hw.eff.memory);
    hw.eff.comm = c.number(e, ew, "comm", frac, dflt(hw.eff.comm)).value_or(hw.eff.comm);
  }
  return hw;
}

ordered_json hardware_to_json(const Hardware& hw) {
  ordered_json j;
  j["name"] = hw.name;
  j["peak_tflops"] = hw.peak_flops / kTera;
  j["mem_bandwidth_gbs"] = hw.mem_bandwidth / kGiga;
  j["mem_capacity_gb"] = hw.mem_capacity / kGiga;
  j["devices_per_node"] = hw.devices_per_node;
  j["intra_node_gbs"] = hw.intra_bandwidth / kGiga;
  j["inter_node_gbs"] = hw.inter_bandwidth / kGiga;
  j["intra_node_latency_us"] = hw.intra_latency / kMicro;
  j["inter_node_latency_us"] = hw.inter_latency / kMicro;
  j["layer_overhead_us"] = hw.layer_overhead / kMicro;
  j["dtype_bytes"] = hw.dtype_bytes;
  j["efficiency"] = {{"matmul", hw.eff.matmul}, {"memory", hw.eff.memory}, {"comm", hw.eff.comm}};
  return j;
}

Hardware load_hardware(const std::string& preset_or_file) {
  for (const auto& n : hardware_preset_names()) {
    if (n == preset_or_file) return hardware_preset(n);
  }
  const json doc = load_json_file(preset_or_file);
  Checker c(preset_or_file);
  Hardware hw = hardware_from_json(doc, c, "");
  c.check();
  return hw;
}

}  // namespace braid::plan
