#include "core/units.hpp"

#include <fmt/format.h>

namespace braid {

std::string gib(std::uint64_t bytes) {
  const double g = double(bytes) / double(1ull << 30);
  return g >= 0.01 || bytes == 0 ? fmt::format("{:.2f} GiB", g) : fmt::format("{:.2f} MiB", double(bytes) / double(1 << 20));
}

}  // namespace braid
