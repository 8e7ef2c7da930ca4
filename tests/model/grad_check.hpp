// Finite-difference gradient checks in double precision, shared by the model tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace braid::test {

// The central difference of f() in x[i], x perturbed in place and restored: (f(x + h) −
// f(x − h)) over the step taken (as x's type rounds it).
template <typename T>
double central_difference(T* x, std::size_t i, const std::function<double()>& f, T h) {
  const T keep = x[i];
  x[i] = keep + h;
  const double up = f();
  x[i] = keep - h;
  const double down = f();
  x[i] = keep;
  return (up - down) / (double(keep + h) - double(keep - h));
}

// Central differences of loss() w.r.t. x[i] for every i in `which` (all when empty),
// compared with analytic[i] to |a − n| <= atol + rtol · max(|a|, |n|). Stops reporting
// after a few mismatches.
inline void check_gradient(const std::string& what, double* x, std::size_t n, const double* analytic,
                           const std::function<double()>& loss, std::vector<std::size_t> which = {},
                           double h = 1e-5, double atol = 1e-8, double rtol = 1e-6) {
  if (which.empty())
    for (std::size_t i = 0; i < n; ++i) which.push_back(i);
  int bad = 0;
  double worst = 0;
  for (std::size_t i : which) {
    const double num = central_difference(x, i, loss, h);
    const double err = std::abs(num - analytic[i]);
    const double tol = atol + rtol * std::max(std::abs(num), std::abs(analytic[i]));
    worst = std::max(worst, err / tol);
    if (err > tol && ++bad <= 5)
      BOOST_ERROR(what << "[" << i << "]: analytic " << analytic[i] << ", finite difference " << num);
  }
  BOOST_TEST_MESSAGE(what << ": " << which.size() << " entries, worst error/tolerance " << worst);
  BOOST_CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << which.size() << " entries differ");
}

// Deterministic pseudo-random values in [-1, 1) (no dependence on the RNG under test).
inline std::vector<double> random_values(std::size_t n, unsigned seed, double scale = 1.0) {
  std::vector<double> v(n);
  std::uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (double& x : v) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x = scale * (double(s >> 11) / double(1ull << 53) * 2.0 - 1.0);
  }
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace braid::test
