// Probes of this machine that need no engine: matrix-product throughput
// (cblas_sgemm, the library the CPU backend uses) and streaming memory
// bandwidth. They give the "hardware" block of a measured profile, so an
// analytic profile for other model shapes can be made at this machine's speed.
#pragma once

#include "backend/backend.hpp"
#include "plan/hardware.hpp"

#include <string>

namespace braid::plan {

struct ProbeResult {
  double gemm_flops = 0;      // FLOP/s of a large square fp32 product (median)
  double gemm_spread = 0;
  double mem_bandwidth = 0;   // bytes/s of a large copy, read + write (median)
  double mem_spread = 0;
  int threads = 1;
};

// n: matrix side of the product; bytes: size of the copied buffer.
ProbeResult probe_machine(int gemm_n = 1024, double copy_bytes = 256e6, int repeats = 5);

// A hardware description of this CPU from the probes: peak = measured product
// rate, bandwidth = measured copy rate, efficiencies 1 (the probes are the
// achievable rates), fp32.
Hardware cpu_hardware(const ProbeResult& p, double mem_capacity);

// The same probes on a backend's device (a GPU): an n × n × n product through the
// backend's gemm with weights stored as `weights` (bf16: the tensor-core path the model
// takes), and a device-to-device copy of copy_bytes. threads is the backend's.
ProbeResult probe_backend(backend::Backend& be, backend::DType weights, int n = 4096, double copy_bytes = 1 << 30,
                          int repeats = 5);

// A hardware description of that device: named as the backend names it, its memory the
// device's total, the element size that of the weights; the links as cpu_hardware's
// until measured (braid-profile comm, or measure under mpirun).
Hardware device_hardware(const ProbeResult& p, const std::string& name, double mem_capacity, int dtype_bytes);

}  // namespace braid::plan
