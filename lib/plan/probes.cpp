#include "plan/probes.hpp"

#include <cblas.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "plan/measure.hpp"

namespace braid::plan {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProbeResult probe_machine(int n, double copy_bytes, int repeats) {
  ProbeResult r;
  r.threads = openblas_get_num_threads();
  const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(nn), b(nn), c(nn, 0.0f);
  for (std::size_t i = 0; i < nn; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  const Timing g = time_repeated(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                    c.data(), n);
      },
      repeats, steady_now);
  // Guard against a library that skipped the work: one entry, computed by hand.
  double check = 0;
  for (int k = 0; k < n; ++k) check += static_cast<double>(a[static_cast<std::size_t>(k)]) * b[static_cast<std::size_t>(k) * n];
  if (std::abs(check - c[0]) > 1e-3 * (1 + std::abs(check))) throw std::runtime_error("sgemm probe computed a wrong product");
  r.gemm_flops = 2.0 * n * static_cast<double>(n) * n / g.median;
  r.gemm_spread = g.spread;

  const auto count = static_cast<std::size_t>(copy_bytes / 4);
  std::vector<float> src(count, 1.0f), dst(count, 0.0f);
  const Timing m = time_repeated([&] { std::memcpy(dst.data(), src.data(), count * 4); }, repeats, steady_now);
  r.mem_bandwidth = 2.0 * static_cast<double>(count) * 4 / m.median;
  r.mem_spread = m.spread;
  return r;
}

Hardware cpu_hardware(const ProbeResult& p, double mem_capacity) {
  Hardware hw;
  hw.name = "cpu";
  hw.peak_flops = p.gemm_flops;
  hw.mem_bandwidth = p.mem_bandwidth;
  hw.mem_capacity = mem_capacity;
  hw.devices_per_node = 1;
  hw.intra_bandwidth = p.mem_bandwidth / 2;  // a copy through shared memory
  hw.inter_bandwidth = 1.25e9;               // 10 Gb/s Ethernet, until measured
  hw.intra_latency = 2e-6;
  hw.inter_latency = 50e-6;
  hw.layer_overhead = 5e-6;
  hw.dtype_bytes = 4;
  hw.eff = {1.0, 1.0, 1.0};
  return hw;
}

}  // namespace braid::plan
