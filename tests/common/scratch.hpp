// The per-test scratch folder ctest provides (BRAID_SCRATCH), or "." when run by hand.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace braid::test {

inline std::filesystem::path scratch(const std::string& name) {
  const char* dir = std::getenv("BRAID_SCRATCH");
  return std::filesystem::path(dir != nullptr ? dir : ".") / name;
}

inline std::filesystem::path fixture(const std::string& name) {
  const char* dir = std::getenv("BRAID_FIXTURES");
  return std::filesystem::path(dir != nullptr ? dir : "tests/fixtures") / name;
}

}  // namespace braid::test
