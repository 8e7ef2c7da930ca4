// Compares what braid-train and braid-score wrote in two runs, through braid's own readers
// (the GPU machine has no h5py):
//
//   compare_outputs weights A.h5 B.h5 ATOL        every tensor of two weight files
//   compare_outputs scored DIR_A DIR_B ATOL RTOL  every scored-*.h5 of two folders: the
//                                                 integer arrays equal, the float ones within
//                                                 ATOL + RTOL·|b|
//
// Prints the largest difference; exit 0 when within, 1 when not, 2 on bad usage or input.
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace braid;
namespace fs = std::filesystem;

namespace {

int weights(const fs::path& a, const fs::path& b, double atol) {
  const io::WeightShardReader ra(a), rb(b);
  if (ra.names() != rb.names()) {
    std::cerr << a << " and " << b << " hold different tensors\n";
    return 1;
  }
  double worst = 0;
  std::string where;
  for (const auto& name : ra.names()) {
    const auto x = ra.read(name), y = rb.read(name);
    if (x.size() != y.size()) {
      std::cerr << name << ": shapes differ\n";
      return 1;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double d = std::abs(double(x[i]) - double(y[i]));
      if (!(d <= worst)) worst = d, where = name;   // NaN counts as worst
    }
  }
  std::cout << b.string() << ": weights apart by at most " << worst << " (" << where << "), tolerance " << atol << "\n";
  return worst <= atol ? 0 : 1;
}

// The largest |x - y| beyond atol + rtol·|y| as a fraction of that bound (> 1: out).
double float_arrays(const std::optional<std::vector<float>>& x, const std::optional<std::vector<float>>& y, double atol,
                    double rtol, bool* same_presence) {
  if (x.has_value() != y.has_value()) *same_presence = false;
  if (!x || !y) return 0;
  if (x->size() != y->size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x->size(); ++i) {
    const double d = std::abs(double((*x)[i]) - double((*y)[i]));
    const double bound = atol + rtol * std::abs(double((*y)[i]));
    if (!(d / bound <= worst)) worst = d / bound;
  }
  return worst;
}

int scored(const fs::path& a, const fs::path& b, double atol, double rtol) {
  std::vector<fs::path> names;
  for (const auto& e : fs::directory_iterator(a)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("scored-", 0) == 0 && e.path().extension() == ".h5") names.push_back(e.path().filename());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    std::cerr << a << ": no scored-*.h5\n";
    return 1;
  }
  double worst = 0;
  for (const auto& n : names) {
    if (!fs::exists(b / n)) {
      std::cerr << (b / n) << " is missing\n";
      return 1;
    }
    const io::SampleBatch x = io::read_sample_shard(a / n).batch, y = io::read_sample_shard(b / n).batch;
    if (x.tokens != y.tokens || x.offsets != y.offsets || x.prompt_len != y.prompt_len || x.sample_id != y.sample_id) {
      std::cerr << n << ": the integer arrays differ\n";
      return 1;
    }
    bool same = true;
    for (auto [p, q] : {std::pair{&x.reward, &y.reward}, {&x.logprobs_ref, &y.logprobs_ref}, {&x.values, &y.values},
                        {&x.advantages, &y.advantages}, {&x.returns, &y.returns}}) {
      worst = std::max(worst, float_arrays(*p, *q, atol, rtol, &same));
    }
    if (!same) {
      std::cerr << n << ": one run wrote an array the other did not\n";
      return 1;
    }
  }
  std::cout << b.string() << ": " << names.size() << " scored shards, the largest difference " << worst
            << " of its bound (atol " << atol << ", rtol " << rtol << ")\n";
  return worst <= 1 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 4 && a[0] == "weights") return weights(a[1], a[2], std::stod(a[3]));
    if (a.size() == 5 && a[0] == "scored") return scored(a[1], a[2], std::stod(a[3]), std::stod(a[4]));
    std::cerr << "usage: compare_outputs weights A.h5 B.h5 ATOL | scored DIR_A DIR_B ATOL RTOL\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "compare_outputs: " << e.what() << "\n";
    return 2;
  }
}
