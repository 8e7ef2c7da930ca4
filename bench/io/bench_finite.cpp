// What the non-finite check (io/finite.hpp) costs beside the read it guards: writes a
// weight shard of --mb megabytes (--tensors tensors of random floats), then times
// reading every tensor back (WeightShardReader::read, which runs the check) and the
// check alone over the same values. Each figure is the best of --repeats runs, with
// GB/s beside it; the read is from the page cache, so the fraction is an upper bound
// of what the check adds to a load from disk. With --checkpoint FILE it also times what
// the tools do, checkpoint::open_model on the CPU backend (read, check, copy into the
// model), against the check alone over the same tensors.
#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "io/finite.hpp"
#include "io/weight_shard.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

using namespace braid;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  CLI::App app("bench_finite: cost of the NaN/Inf check against a weight-shard read");
  double mb = 100;
  int tensors = 8, repeats = 5;
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string checkpoint;
  app.add_option("--checkpoint", checkpoint, "Also time loading this weight file into a model");
  app.add_option("--mb", mb, "Size of the shard in MB (float32 values)")->capture_default_str();
  app.add_option("--tensors", tensors, "Tensors in the shard")->capture_default_str();
  app.add_option("--repeats", repeats, "Timed runs (the best is reported)")->capture_default_str();
  app.add_option("--dir", dir, "Where to write the shard")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const auto per = static_cast<std::int64_t>(mb * 1e6 / 4 / tensors);
  const std::filesystem::path path = std::filesystem::path(dir) / "bench_finite.h5";
  std::vector<float> values(static_cast<std::size_t>(per));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.f, 0.02f);
  for (auto& v : values) v = normal(gen);
  {
    io::WeightShardWriter w(path, {});
    for (int t = 0; t < tensors; ++t) w.add(fmt::format("t{}", t), {per}, values);
    w.commit();
  }
  const double bytes = double(per) * tensors * 4;
  const io::WeightShardReader r(path);
  double read_best = std::numeric_limits<double>::max(), check_best = read_best;
  std::size_t sink = 0, want = 0;
  for (int k = 0; k < repeats; ++k) {
    auto t0 = Clock::now();
    for (int t = 0; t < tensors; ++t) r.read(fmt::format("t{}", t), values.data());
    read_best = std::min(read_best, std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    for (int t = 0; t < tensors; ++t) sink += io::first_non_finite(values), want += values.size();
    check_best = std::min(check_best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::filesystem::remove(path);
  fmt::print("shard {:.0f} MB ({} tensors): read with check {:.1f} ms ({:.2f} GB/s), check alone {:.1f} ms "
             "({:.2f} GB/s): {:.1f}% of the read{}\n",
             bytes / 1e6, tensors, read_best * 1e3, bytes / read_best / 1e9, check_best * 1e3,
             bytes / check_best / 1e9, 100 * check_best / read_best, sink == want ? "" : " (a non-finite value?)");
  if (checkpoint.empty()) return 0;

  const io::WeightShardReader ck(checkpoint);
  std::vector<std::vector<float>> held;
  double ck_bytes = 0;
  for (const auto& name : ck.names()) held.push_back(ck.read(name)), ck_bytes += 4.0 * double(held.back().size());
  const auto be = backend::make_backend("cpu", 2);
  double load_best = std::numeric_limits<double>::max(), ck_check_best = load_best;
  for (int k = 0; k < repeats; ++k) {
    auto t0 = Clock::now();
    const auto opened = checkpoint::open_model(checkpoint, *be);
    load_best = std::min(load_best, std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    for (const auto& v : held) sink += io::first_non_finite(v);
    ck_check_best = std::min(ck_check_best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  fmt::print("{} ({:.0f} MB, {} tensors): open_model {:.1f} ms, check alone {:.1f} ms ({:.2f} GB/s): {:.1f}% of the load\n",
             checkpoint, ck_bytes / 1e6, held.size(), load_best * 1e3, ck_check_best * 1e3,
             ck_bytes / ck_check_best / 1e9, 100 * ck_check_best / load_best);
  return 0;
}
