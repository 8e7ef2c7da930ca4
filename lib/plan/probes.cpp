#include "plan/probes.hpp"

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "plan/measure.hpp"

namespace braid::plan {
namespace {

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The product probes' operands a and b [n × n]: small multiples of powers of two, exact in
// bf16, so that the checked entry is exact on every path.
void fill_operands(std::vector<float>& a, std::vector<float>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
}

// Guards against a library that skipped the work: c[0] = Σ_k a[k] · b[k · b_step], computed
// by hand (b_step: n when b is [k × n], 1 when it is [n × k], read transposed).
void check_first_entry(const std::vector<float>& a, const std::vector<float>& b, int n, std::size_t b_step, float c0,
                       const std::string& what) {
  double check = 0;
  for (int k = 0; k < n; ++k)
    check += static_cast<double>(a[static_cast<std::size_t>(k)]) * b[static_cast<std::size_t>(k) * b_step];
  if (std::abs(check - c0) > 1e-3 * (1 + std::abs(check))) throw std::runtime_error(what + " computed a wrong product");
}

}  // namespace

ProbeResult probe_machine(int n, double copy_bytes, int repeats) {
  ProbeResult r;
  r.threads = openblas_get_num_threads();
  const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(nn), b(nn), c(nn, 0.0f);
  fill_operands(a, b);
  const Timing g = time_repeated(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                    c.data(), n);
      },
      repeats, steady_now);
  check_first_entry(a, b, n, static_cast<std::size_t>(n), c[0], "sgemm probe");
  r.gemm_flops = 2.0 * n * static_cast<double>(n) * n / g.median;
  r.gemm_spread = g.spread;

  const auto count = static_cast<std::size_t>(copy_bytes / 4);
  std::vector<float> src(count, 1.0f), dst(count, 0.0f);
  const Timing m = time_repeated([&] { std::memcpy(dst.data(), src.data(), count * 4); }, repeats, steady_now);
  r.mem_bandwidth = 2.0 * static_cast<double>(count) * 4 / m.median;
  r.mem_spread = m.spread;
  return r;
}

ProbeResult probe_backend(backend::Backend& be, backend::DType weights, int n, double copy_bytes, int repeats) {
  namespace bk = braid::backend;
  ProbeResult r;
  r.threads = be.threads();
  const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(nn), b(nn);
  fill_operands(a, b);
  bk::Buffer<float> da(be, nn), dc(be, nn);
  be.copy_to_device(da.data(), a.data(), nn * sizeof(float));
  bk::Buffer<float> db32;
  bk::Buffer<std::uint16_t> db16;
  bk::Weights w;
  if (weights == bk::DType::bf16) {
    std::vector<std::uint16_t> h(nn);
    for (std::size_t i = 0; i < nn; ++i) h[i] = bk::float_to_bf16(b[i]);
    db16 = bk::Buffer<std::uint16_t>(be, nn);
    be.copy_to_device(db16.data(), h.data(), nn * sizeof(std::uint16_t));
    w = bk::Weights(db16.data(), bk::DType::bf16);
  } else {
    db32 = bk::Buffer<float>(be, nn);
    be.copy_to_device(db32.data(), b.data(), nn * sizeof(float));
    w = bk::Weights(db32.data());
  }
  // C = A · Bᵀ, the products' layout (weights [out × in]).
  auto product = [&] {
    be.ops<float>().gemm(false, true, n, n, n, 1.0f, da.data(), n, w, n, 0.0f, dc.data(), n);
    be.synchronize();
  };
  product();  // warm-up: plans, workspaces
  const Timing g = time_repeated(product, repeats, steady_now);
  float c0 = 0;
  be.copy_to_host(&c0, dc.data(), sizeof(float));
  check_first_entry(a, b, n, 1, c0, "the product probe on " + be.name());
  r.gemm_flops = 2.0 * n * static_cast<double>(n) * n / g.median;
  r.gemm_spread = g.spread;

  const auto bytes = static_cast<std::size_t>(copy_bytes);
  bk::Buffer<std::byte> src(be, bytes), dst(be, bytes);
  auto copy = [&] {
    be.copy(dst.data(), src.data(), bytes);
    be.synchronize();
  };
  copy();
  const Timing m = time_repeated(copy, repeats, steady_now);
  r.mem_bandwidth = 2.0 * static_cast<double>(bytes) / m.median;
  r.mem_spread = m.spread;
  return r;
}

Hardware device_hardware(const ProbeResult& p, const std::string& name, double mem_capacity, int dtype_bytes) {
  Hardware hw = cpu_hardware(p, mem_capacity);
  hw.name = name;
  hw.dtype_bytes = dtype_bytes;
  return hw;
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
