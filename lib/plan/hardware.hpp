// A device and its links as the analytic cost model sees them, with presets for
// the GPUs braid plans for. Units inside braid are SI (s, B, B/s, FLOP/s); the
// JSON form uses the units people quote (TFLOP/s, GB/s, GB, µs).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"

namespace braid::plan {

// Fractions of the peak a real kernel reaches. A measured profile calibrates
// them (analytic_profile.hpp: calibrate_efficiency).
struct Efficiency {
  double matmul = 0.6;  // of peak_flops, for large matrix products
  double memory = 0.7;  // of mem_bandwidth, for streaming reads
  double comm = 0.7;    // of link bandwidth, for large messages
};

// Upper bounds of a device's figures in a hardware file, a profile or a cluster
// (docs/formats-plan.md): beyond them a value is a typo (1e300 or 2^63 GB/s were planned with).
inline constexpr double kMaxTflops = 1e6;     // 1 EFLOP/s a device
inline constexpr double kMaxGbs = 1e6;        // 1 PB/s: memory bandwidth and links
inline constexpr double kMaxMemoryGb = 1e6;   // 1 PB a device
inline constexpr double kMaxLatencyUs = 1e6;  // 1 s a message or a layer call

struct Hardware {
  std::string name;
  double peak_flops = 0;        // dense matrix FLOP/s per device at the working dtype
  double mem_bandwidth = 0;     // bytes/s per device
  double mem_capacity = 0;      // bytes per device
  int devices_per_node = 8;
  double intra_bandwidth = 0;   // bytes/s per device and direction inside a node
  double inter_bandwidth = 0;   // bytes/s per device and direction between nodes
  double intra_latency = 0;     // seconds per message inside a node
  double inter_latency = 0;     // seconds per message between nodes
  double layer_overhead = 0;    // seconds per layer call (kernel launches, syncs)
  int dtype_bytes = 2;          // bytes per weight/activation element (2: bf16, 4: fp32)
  Efficiency eff;
};

// "h100", "h200": SXM parts, 8 per node with NVLink, one 200 Gb/s NIC per GPU.
Hardware hardware_preset(std::string_view name);
std::vector<std::string> hardware_preset_names();

// Reads the JSON form (every problem recorded in c); `where` is its path. `written`: as
// hardware_to_json writes it into a profile, every key required (a hardware file takes the
// documented defaults).
Hardware hardware_from_json(const json& j, Checker& c, std::string_view where, bool written = false);
ordered_json hardware_to_json(const Hardware& hw);

// A preset name, or a JSON file holding a hardware object.
Hardware load_hardware(const std::string& preset_or_file);

}  // namespace braid::plan
