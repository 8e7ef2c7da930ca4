#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace braid::log {
namespace {
std::string g_tool = "braid";
std::atomic<Level> g_level{Level::info};
}  // namespace

void set_tool_name(std::string name) { g_tool = std::move(name); }
const std::string& tool_name() { return g_tool; }
void set_level(Level l) { g_level = l; }
Level level() { return g_level; }

void write(Level, std::string_view prefix, std::string_view message) {
  std::string line;
  line.reserve(g_tool.size() + prefix.size() + message.size() + 3);
  line += g_tool;
  line += ": ";
  line += prefix;
  line += message;
  line += '\n';
  // One write(2) so that lines from concurrent ranks do not interleave.
  std::fflush(stderr);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace braid::log
