// Arrays of numbers in tests: made (ramp) and compared (the figures a tolerance is held against).
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace braid::test {

// start, start + 1, ..., n values.
inline std::vector<float> ramp(std::int64_t n, float start) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// The largest |a[i]|.
inline double largest(std::span<const float> a) {
  double d = 0;
  for (float x : a) d = std::max(d, double(std::abs(x)));
  return d;
}

// The largest |a[i] - b[i]| (a and b of one size, else the test case stops).
inline double max_difference(std::span<const float> a, std::span<const float> b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

// The normalised mean squared error of a against ref: sum (a - ref)^2 / sum ref^2 (the sum
// itself where ref is all zero).
inline double nmse(const std::vector<double>& a, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm == 0 ? err : err / norm;
}

}  // namespace braid::test
