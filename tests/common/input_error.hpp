// Helpers for tests that check braid's InputError messages.
#pragma once

#include <string>

#include "core/error.hpp"

namespace braid::test {

// The message of the InputError `fn` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace braid::test
