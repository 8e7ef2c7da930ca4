// The memory pass on its own: from the schedule a fixed latency search reaches
// (an iteration budget, so it is the same in every run), lower the peak
// activation memory with a given number of neighbours, for several seeds.
// Iteration counts, not seconds, make the figures independent of the machine's
// load; the CPU time per neighbour is printed beside them.
//
//   bench_sched_memory SPEC.json LATENCY_ITERATIONS MEM_ITERATIONS [SEEDS] [T0_FACTOR] [CACHE] [CHAIN_MOVES] [LEVEL_MARGIN]
//
// CACHE: a file that keeps the latency search's schedule between runs (read when it
// exists, written when not), so that variants of the memory pass start from it at once.
// CHAIN_MOVES: the share of chain moves in the memory pass (default: the tool's).
// LEVEL_MARGIN: the memory pass's level margin (AnnealOptions::mem_level_margin; default: the tool's).
#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <string>

#include "core/files.hpp"
#include "sched/anneal.hpp"
#include "sched/baselines.hpp"
#include "sched/bound.hpp"
#include "sched/problem.hpp"

using namespace braid::sched;

namespace {
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: {} SPEC.json LATENCY_ITERATIONS MEM_ITERATIONS [SEEDS] [T0_FACTOR] [CACHE] [CHAIN_MOVES] "
               "[LEVEL_MARGIN]\n",
               argv[0]);
    return 2;
  }
  const Problem p = build_problem(parse_schedspec(braid::read_text_file(argv[1]), argv[1]));
  const std::uint64_t latency_iterations = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t mem_iterations = std::strtoull(argv[3], nullptr, 10);
  const int seeds = argc > 4 ? std::atoi(argv[4]) : 3;
  const double t0_factor = argc > 5 ? std::atof(argv[5]) : 0.5;
  const double serial_peak = evaluate(p, one_f_one_b(p)).peak_memory;

  AnnealOptions opt;
  const double chain_moves = argc > 7 ? std::atof(argv[7]) : opt.mem_chain_moves;
  const double level_margin = argc > 8 ? std::atof(argv[8]) : opt.mem_level_margin;
  if (!(chain_moves >= 0 && chain_moves <= 1) || !(level_margin >= 0)) {
    fmt::print(stderr, "{}: CHAIN_MOVES must be a share in [0, 1] and LEVEL_MARGIN at least 0\n", argv[0]);
    return 2;
  }
  opt.iterations = latency_iterations;
  opt.time_limit = 0;
  opt.memory_pass = false;
  const double c0 = cpu_seconds();
  AnnealResult latency;
  const std::string cache = argc > 6 ? argv[6] : "";
  if (!cache.empty() && std::filesystem::exists(cache)) {
    std::ifstream in(cache, std::ios::binary);
    latency.order.resize(static_cast<std::size_t>(p.devices) * static_cast<std::size_t>(p.per_device));
    in.read(reinterpret_cast<char*>(latency.order.data()), static_cast<std::streamsize>(latency.order.size() * sizeof(std::int32_t)));
    const Timing t = evaluate(p, latency.order);
    if (!in || !t.valid) {
      fmt::print(stderr, "{}: not a schedule of this spec\n", cache);
      return 2;
    }
    latency.makespan = t.makespan;
    latency.peak_memory = t.peak_memory;
    latency.stats.iterations = latency_iterations;
  } else {
    latency = anneal(p, *greedy(p), lower_bound(p).value, opt);
    if (!cache.empty()) {
      std::ofstream out(cache, std::ios::binary);
      out.write(reinterpret_cast<const char*>(latency.order.data()), static_cast<std::streamsize>(latency.order.size() * sizeof(std::int32_t)));
    }
  }
  fmt::print("{}: latency search {} iterations: makespan {:.6g} (bound {:.6g}), peak {:.4g} ({:.1f} s CPU)\n", argv[1],
             latency.stats.iterations, latency.makespan, lower_bound(p).value, latency.peak_memory, cpu_seconds() - c0);
  for (int seed = 1; seed <= seeds; ++seed) {
    AnnealStats st;
    const double c1 = cpu_seconds();
    const Order order = lower_memory(p, latency.order, mem_iterations, 0, serial_peak, static_cast<std::uint64_t>(seed),
                                     0x5eed, &st, t0_factor, chain_moves, level_margin);
    const double cpu = cpu_seconds() - c1;
    const Timing t = evaluate(p, order);
    fmt::print("  seed {}: peak {:.4g} ({:.3f}x serial 1F1B), makespan {:.6g}, {} neighbours, {:.1f} s CPU ({:.0f} ns each)\n",
               seed, t.peak_memory, t.peak_memory / serial_peak, t.makespan, st.mem_iterations, cpu,
               1e9 * cpu / static_cast<double>(std::max<std::uint64_t>(st.mem_iterations, 1)));
  }
  return 0;
}
