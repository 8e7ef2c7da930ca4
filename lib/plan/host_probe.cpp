#include "plan/host_probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/mpi.hpp"
#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "io/weight_shard.hpp"

extern char** environ;

namespace braid::plan {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


// Runs argv with stdin, stdout and stderr on /dev/null; its wall seconds, or a negative
// number when it could not start or did not end with status 0.
double timed_run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd : {0, 1, 2}) posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  const double s = seconds_since(t0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? s : -1;
}

// The median of `repeats` runs after one untimed one; negative when any failed.
double timed_runs(const std::vector<std::string>& argv, int repeats) {
  if (timed_run(argv) < 0) return -1;
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const double s = timed_run(argv);
    if (s < 0) return -1;
    t.push_back(s);
  }
  return median(t);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// Seconds to first-touch `bytes` of fresh memory: pages the kernel maps in on their first
// write, as a new process's buffers are (a freed and reallocated vector would reuse
// pages the allocator kept).
double touch_once(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map memory to time its first touch");
  const auto t0 = Clock::now();
  std::memset(p, 1, bytes);
  const double s = seconds_since(t0);
  ::munmap(p, bytes);
  return s;
}

struct FileTimes {
  double write = 0, read = 0;
};

// One weight-shard file of `tensors` tensors of `floats` values each, written (sealed,
// renamed) and read back whole.
FileTimes file_once(const fs::path& dir, int tensors, std::size_t floats) {
  const fs::path path = dir / "probe.h5";
  std::vector<float> data(floats, 0.5f);
  io::WeightShardMeta meta;
  meta.model_config = "{}";
  const auto t0 = Clock::now();
  {
    io::WeightShardWriter w(path, meta);
    for (int k = 0; k < tensors; ++k) w.add(fmt::format("probe.{}", k), {static_cast<std::int64_t>(floats)}, data);
    w.commit();
  }
  FileTimes t;
  t.write = seconds_since(t0);
  const auto t1 = Clock::now();
  {
    const io::WeightShardReader r(path);
    for (int k = 0; k < tensors; ++k) data = r.read(fmt::format("probe.{}", k));
  }
  t.read = seconds_since(t1);
  fs::remove(path);
  return t;
}

}  // namespace

int run_mpi_noop() {
  comm::MpiRuntime mpi(nullptr, nullptr);
  comm::mpi_world()->barrier();
  return 0;
}

HostCosts probe_host(const HostProbeOptions& o) {
  HostCosts h;
  h.cores = usable_cores();
  const int repeats = std::max(1, o.repeats);
  h.process_start = std::max(0.0, timed_runs({o.self, "noop"}, repeats));
  if (!o.mpirun.empty()) {
    for (int r : o.mpi_ranks) {
      std::vector<std::string> argv = o.mpirun;
      argv.insert(argv.end(), {"-np", std::to_string(r), o.self, "mpi-noop"});
      const double s = timed_runs(argv, repeats);
      if (s < 0) {
        log::warn("could not time `{}` (is mpirun there, and allowed to run?): the profile has no MPI start-up "
                  "times, and a run's mpirun is predicted as a plain process start",
                  fmt::format("{}", fmt::join(argv, " ")));
        h.mpi_start = {};
        break;
      }
      h.mpi_start.x.push_back(r);
      h.mpi_start.v.push_back(s);
    }
  }
  const std::size_t touch_bytes = 64u << 20;
  std::vector<double> touch;
  touch_once(touch_bytes);
  for (int i = 0; i < repeats; ++i) touch.push_back(touch_once(touch_bytes));
  h.touch_bandwidth = touch_bytes / std::max(1e-9, median(touch));

  char tmpl[] = "/tmp/braid-profile-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("cannot make a scratch folder under /tmp");
  const fs::path dir(tmpl);
  // One small tensor (the file's own cost), 64 small ones (each dataset's) and one of
  // 64 MiB (the bytes').
  constexpr int kMany = 64;
  const std::size_t small = 1 << 10, large = 16u << 20;  // floats: 4 KiB and 64 MiB
  std::vector<double> w1, r1, wm, rm, wl, rl;
  try {
    file_once(dir, 1, small);
    for (int i = 0; i < repeats; ++i) {
      const FileTimes one = file_once(dir, 1, small), many = file_once(dir, kMany, 64), big = file_once(dir, 1, large);
      w1.push_back(one.write);
      r1.push_back(one.read);
      wm.push_back(many.write);
      rm.push_back(many.read);
      wl.push_back(big.write);
      rl.push_back(big.read);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  const double bytes = static_cast<double>(large - small) * sizeof(float);
  h.write_bandwidth = bytes / std::max(1e-9, median(wl) - median(w1));
  h.read_bandwidth = bytes / std::max(1e-9, median(rl) - median(r1));
  h.dataset_latency = std::max(0.0, 0.5 * (median(wm) + median(rm) - median(w1) - median(r1)) / (kMany - 1));
  h.file_latency = std::max(0.0, 0.5 * (median(w1) + median(r1)) - h.dataset_latency);
  return h;
}

}  // namespace braid::plan
