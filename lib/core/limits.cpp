#include "core/limits.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/error.hpp"

namespace braid {
namespace {

// cgroup v2's memory.max of this process's group ("max": none), or v1's limit_in_bytes.
std::uint64_t cgroup_limit() {
  std::uint64_t limit = UINT64_MAX;
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    std::string text;
    if (max >> text && text != "max") limit = std::min<std::uint64_t>(limit, std::stoull(text));
  }
  std::ifstream v1("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  std::uint64_t bytes = 0;
  if (v1 >> bytes && bytes > 0) limit = std::min(limit, bytes);
  return limit;
}

}  // namespace

std::uint64_t host_memory_limit() {
  static const std::uint64_t limit = [] {
    std::uint64_t m = UINT64_MAX;
    struct sysinfo si {};
    if (::sysinfo(&si) == 0) {
      m = (static_cast<std::uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
    }
    for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
      struct rlimit rl {};
      if (::getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        m = std::min<std::uint64_t>(m, rl.rlim_cur);
      }
    }
    try {
      m = std::min(m, cgroup_limit());
    } catch (const std::exception&) {
      // an unreadable cgroup file limits nothing
    }
    return m;
  }();
  return limit;
}

void require_host_memory(std::uint64_t bytes, const std::string& file, const std::string& field,
                         const std::string& what) {
  const std::uint64_t limit = host_memory_limit();
  if (bytes <= limit) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  throw InputError(file, field,
                   fmt::format("{} would take {:.3g} GiB, more than the {:.3g} GiB of memory this process can have "
                               "(physical memory and swap, ulimit -v/-d, its cgroup's memory.max)",
                               what, double(bytes) / kGiB, double(limit) / kGiB));
}

}  // namespace braid
