// Tokens/s as the engine benchmarks report it: mean and sample standard deviation
// over `repeats` timed runs after one untimed warm-up.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

namespace braid::bench {

struct Stat { double mean, sd; };

inline Stat rate_stat(const std::vector<double>& rate) {
  const double mean = std::accumulate(rate.begin(), rate.end(), 0.0) / double(rate.size());
  double var = 0;
  for (double x : rate) var += (x - mean) * (x - mean);
  return {mean, rate.size() > 1 ? std::sqrt(var / double(rate.size() - 1)) : 0.0};
}

// Times `run` (which processes `tokens` tokens).
inline Stat measure(int repeats, double tokens, const std::function<void()>& run) {
  run();
  std::vector<double> rate;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    rate.push_back(tokens / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return rate_stat(rate);
}

// The same, for a `run` that times its own measured part and returns the seconds.
inline Stat measure_timed(int repeats, double tokens, const std::function<double()>& run) {
  run();
  std::vector<double> rate;
  for (int r = 0; r < repeats; ++r) rate.push_back(tokens / run());
  return rate_stat(rate);
}

}  // namespace braid::bench
