// A helper of the tools' GPU test (cli_tools_gpu.sh), not a test itself: compares what a
// tool wrote on one device with what it wrote on another, through braid's own readers (the
// GPU machine has no h5py).
//
//   compare_outputs shards A.h5 B.h5 RTOL   sample shards: tokens, offsets, prompt lengths
//                                           and ids equal; each float array (reward and the
//                                           per-token ones) within RTOL
//   compare_outputs weights A.h5 B.h5 RTOL  checkpoints: the same tensors, each within RTOL
//
// "Within RTOL" is ‖a − b‖ ≤ RTOL · ‖b‖ over the whole array (the model-parity test's
// measure; an all-zero b asks for a equal). Prints every array's relative difference and
// exits 1 when one is over, 2 on bad usage or unreadable files.
#include "core/error.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

bool failed = false;
bool quiet = false;               // weights: only the arrays over the bound, then the largest difference
double largest = -1;
std::string largest_name;

void compare(const std::string& name, const std::vector<float>& a, const std::vector<float>& b, double rtol) {
  if (a.size() != b.size()) {
    fmt::print("{}: {} values against {}\n", name, a.size(), b.size());
    failed = true;
    return;
  }
  double diff = 0, norm = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    diff += d * d;
    norm += double(b[i]) * double(b[i]);
    worst = std::max(worst, std::abs(d));
  }
  diff = std::sqrt(diff);
  norm = std::sqrt(norm);
  const double rel = norm > 0 ? diff / norm : (diff > 0 ? INFINITY : 0.0);
  const bool ok = std::isfinite(rel) && rel <= rtol;
  if (!(rel <= largest)) {
    largest = rel;
    largest_name = name;
  }
  if (quiet && ok) return;
  fmt::print("{:<40} relative {:.3e}  max |a-b| {:.3e}  ({} values){}\n", name, rel, worst, a.size(),
             ok ? "" : fmt::format("  OVER {:.1e}", rtol));
  failed = failed || !ok;
}

template <typename T>
void equal(const std::string& name, const std::vector<T>& a, const std::vector<T>& b) {
  const bool ok = a == b;
  fmt::print("{:<40} {}\n", name, ok ? "equal" : "DIFFERENT");
  failed = failed || !ok;
}

int shards(const std::string& pa, const std::string& pb, double rtol) {
  const braid::io::SampleBatch a = braid::io::read_sample_shard(pa).batch, b = braid::io::read_sample_shard(pb).batch;
  equal("tokens", a.tokens, b.tokens);
  equal("offsets", a.offsets, b.offsets);
  equal("prompt_len", a.prompt_len, b.prompt_len);
  equal("sample_id", a.sample_id, b.sample_id);
  if (a.tokens != b.tokens || a.offsets != b.offsets) return 1;   // the floats would not line up
  if (a.reward.has_value() != b.reward.has_value()) {
    fmt::print("reward: in one shard only\n");
    failed = true;
  } else if (a.reward) {
    compare("reward", *a.reward, *b.reward, rtol);
  }
  for (const auto& f : braid::io::token_array_fields()) {
    const auto& x = a.*f.member;
    const auto& y = b.*f.member;
    if (x.has_value() != y.has_value()) {
      fmt::print("{}: in one shard only\n", f.path);
      failed = true;
    } else if (x) {
      compare(f.path, *x, *y, rtol);
    }
  }
  return failed ? 1 : 0;
}

int weights(const std::string& pa, const std::string& pb, double rtol) {
  const braid::io::WeightShardSet a({pa}), b({pb});
  equal("tensor names", a.names(), b.names());
  quiet = true;
  for (const std::string& name : a.names()) {
    if (b.contains(name)) compare(name, a.read(name), b.read(name), rtol);
  }
  fmt::print("{} tensors; the largest relative difference {:.3e} ({}), bound {:.1e}\n", a.names().size(), largest,
             largest_name, rtol);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fmt::print(stderr, "usage: compare_outputs shards|weights A.h5 B.h5 RTOL\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    const double rtol = std::stod(argv[4]);
    if (mode == "shards") return shards(argv[2], argv[3], rtol);
    if (mode == "weights") return weights(argv[2], argv[3], rtol);
    fmt::print(stderr, "compare_outputs: the mode is shards or weights, not {}\n", mode);
  } catch (const std::exception& e) {
    fmt::print(stderr, "compare_outputs: {}\n", e.what());
  }
  return 2;
}
