// Shared by the libFuzzer targets (built only with -DBRAID_FUZZ=ON, see fuzz/CMakeLists.txt).
// Each target hands the fuzzer's bytes to one braid reader. The errors a reader is documented
// to throw on bad input (InputError, UsageError, std::invalid_argument) are the expected
// outcome and are swallowed; anything else escapes and libFuzzer reports it, like a crash,
// a sanitizer report or a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "core/error.hpp"

namespace braid::fuzz {

// A per-process scratch file (the reader under test opens a path); rewritten for every input.
inline const std::filesystem::path& scratch_file(const char* suffix) {
  static const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                         ("braid-fuzz-" + std::to_string(::getpid()) + suffix);
  return p;
}

inline const std::filesystem::path& write_input(const std::uint8_t* data, std::size_t size, const char* suffix) {
  const auto& p = scratch_file(suffix);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  return p;
}

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

template <class F>
void expect_documented_errors(F&& f) {
  try {
    f();
  } catch (const braid::InputError&) {
  } catch (const braid::UsageError&) {
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace braid::fuzz
