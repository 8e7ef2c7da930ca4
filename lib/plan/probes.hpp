// Probes of this machine that need no engine: matrix-product throughput
// (cblas_sgemm, the library the CPU backend uses) and streaming memory
// bandwidth. They give the "hardware" block of a measured profile, so an
// analytic profile for other model shapes can be made at this machine's speed.
#pragma once

#include "plan/hardware.hpp"

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

}  // namespace braid::plan
