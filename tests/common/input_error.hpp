// Helpers for tests that check braid's InputError messages.
#pragma once

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace braid::test {

// The InputError `fn` throws, if it throws one.
template <typename F>
std::optional<InputError> input_error_of(F&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

// The message of the InputError `fn` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& fn) {
  const auto e = input_error_of(fn);
  return e ? e->what() : "";
}

// The same, checking that the error names `file`.
template <typename F>
std::string error_of(F&& fn, const std::string& file) {
  const auto e = input_error_of(fn);
  if (e) BOOST_TEST(e->file() == file);
  return e ? e->what() : "";
}

// The message of the InputError `fn` throws; the test case fails when it throws none.
template <typename F>
std::string refusal(F&& fn) {
  const auto e = input_error_of(fn);
  BOOST_REQUIRE_MESSAGE(e, "no InputError");
  return e->what();
}

// The problems of the InputError `fn` throws, checking that it names `file`; the test
// case fails when it throws none.
template <typename F>
std::vector<std::string> problems_of(F&& fn, const std::string& file) {
  const auto e = input_error_of(fn);
  BOOST_REQUIRE_MESSAGE(e, "no InputError (" + file + " was accepted)");
  BOOST_TEST(e->file() == file);
  return e->problems();
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace braid::test
