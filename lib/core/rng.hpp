// A seeded random generator whose streams are the same on every run, every
// machine and every standard library: xoshiro256** seeded through splitmix64
// from (seed, stream). Give each MPI rank, thread or sequence its own stream
// number rather than its own seed arithmetic: Rng(seed, rank).
//
// The distributions here are braid's own (std:: distributions differ between
// standard libraries, which would break reproducibility across builds).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <utility>

namespace braid {

class Rng {
 public:
  using result_type = std::uint64_t;

  explicit Rng(std::uint64_t seed = 0, std::uint64_t stream = 0);

  std::uint64_t next();
  std::uint64_t operator()() { return next(); }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform();
  // Uniform float in [0, 1) with 24 random bits.
  float uniform_float();
  // Uniform integer in [0, n), unbiased; n > 0.
  std::uint64_t below(std::uint64_t n);
  // Uniform integer in [lo, hi] inclusive.
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  // Standard normal (Box–Muller, the spare value cached).
  double normal();

  // Fisher–Yates, identical on every platform.
  template <typename T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[below(i)]);
    }
  }

  // A new generator for a sub-stream of this one's seed, e.g. per sequence.
  Rng split(std::uint64_t stream) const { return Rng(seed_, stream_ * 0x9E3779B97F4A7C15ull + stream + 1); }

 private:
  std::uint64_t s_[4];
  std::uint64_t seed_;
  std::uint64_t stream_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace braid
