// Messages on stderr, each prefixed with the tool's name ("braid-schedgen: ...").
// Data goes to stdout and never through here.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace braid::log {

enum class Level { quiet = 0, warn = 1, info = 2, debug = 3 };

void set_tool_name(std::string name);
const std::string& tool_name();
void set_level(Level level);
Level level();

// Writes "tool: [prefix]message\n" to stderr as one write (safe across MPI ranks).
void write(Level level, std::string_view prefix, std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::info) write(Level::info, "", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::debug) write(Level::debug, "debug: ", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::warn) write(Level::warn, "warning: ", fmt::format(f, std::forward<Args>(args)...));
}
// Errors are always printed, whatever the level.
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::quiet, "error: ", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace braid::log
