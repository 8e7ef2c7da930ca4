// Load throughput of a weight shard with and without verification, in the same run:
// writes a shard of --mib MiB (--tensors float32 tensors) with WeightShardWriter
// (sealed, every dataset checksummed), copies it, deletes the copy's checksum
// attributes and zeroes its seal (a file as written before seals and checksums), then
// reads every tensor of each through WeightShardReader, alternating the two files,
// --repeats times after one warm-up each. The first load of the old file includes
// the probe (a child process reads an unsealed file whole first, once per content
// and process; lib/io/h5_guard.hpp) and is printed apart. The files are freshly
// written, so the reads come from the page cache: the figure is braid's own cost
// (HDF5 + hashes), not the disk's. Also prints XXH3-64 alone over the same bytes.
//
//   bench_shard_load --dir /tmp --mib 1024 --repeats 5
#include "bench/model/throughput.hpp"
#include "io/h5.hpp"
#include "io/h5_guard.hpp"
#include "io/weight_shard.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <hdf5.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <vector>

using namespace braid;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string dir = ".";
  std::int64_t mib = 1024;
  int tensors = 8;
  int repeats = 5;
};

// Deletes the checksum attribute of every dataset of the file.
void strip_checksums(const fs::path& path) {
  std::vector<std::string> names;
  {
    const auto f = io::h5::File::open_read(path);
    names = f.dataset_paths();
  }
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  for (const auto& n : names) {
    const hid_t d = H5Dopen2(f, n.c_str(), H5P_DEFAULT);
    H5Adelete(d, io::h5::kChecksumAttr);
    H5Dclose(d);
  }
  H5Fclose(f);
}

// Seconds to read every tensor of the shard into buf.
double load_seconds(const fs::path& path, std::vector<float>& buf) {
  const auto t0 = std::chrono::steady_clock::now();
  io::WeightShardReader r(path);
  for (const auto& name : r.names()) r.read(name, buf.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Weight shard load throughput with and without checksum verification"};
  app.add_option("--dir", o.dir, "Folder for the two scratch shards (removed at the end)")->capture_default_str();
  app.add_option("--mib", o.mib, "Shard size in MiB")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--tensors", o.tensors, "Tensors in the shard")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--repeats", o.repeats, "Timed loads of each file")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::int64_t per_tensor = o.mib * 1024 * 1024 / 4 / o.tensors;
  const double bytes = double(per_tensor) * 4 * o.tensors;
  std::vector<float> buf(static_cast<std::size_t>(per_tensor));
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i % 1000) * 1e-3f;

  const fs::path with = fs::path(o.dir) / "bench_shard_load.sums.h5";
  const fs::path without = fs::path(o.dir) / "bench_shard_load.nosums.h5";
  {
    io::WeightShardWriter w(with, {});
    for (int t = 0; t < o.tensors; ++t) w.add(fmt::format("tensor.{}", t), {per_tensor}, buf.data());
    w.commit();
  }
  fs::copy_file(with, without, fs::copy_options::overwrite_existing);
  strip_checksums(without);
  {
    std::fstream io(without, std::ios::in | std::ios::out | std::ios::binary);
    const std::string zeros(io::h5::kSealBlock, '\0');
    io.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }

  std::vector<double> rate_with, rate_without;
  load_seconds(with, buf);
  const double first_old = bytes / load_seconds(without, buf) / 1e9;
  for (int r = 0; r < o.repeats; ++r) {
    rate_with.push_back(bytes / load_seconds(with, buf) / 1e9);
    rate_without.push_back(bytes / load_seconds(without, buf) / 1e9);
  }
  const auto hash = bench::measure(o.repeats, double(buf.size() * sizeof(float)) / 1e9, [&] {
    volatile auto s = io::h5::checksum_of(buf.data(), buf.size() * sizeof(float)).size();
    (void)s;
  });
  const auto w = bench::rate_stat(rate_with), wo = bench::rate_stat(rate_without);
  fmt::print("shard {:.0f} MB in {} tensors, {} loads each (page cache)\n", bytes / 1e6, o.tensors, o.repeats);
  fmt::print("  load, sealed and checksums verified: {:6.2f} ± {:.2f} GB/s\n", w.mean, w.sd);
  fmt::print("  load, no checksums (old):   {:6.2f} ± {:.2f} GB/s\n", wo.mean, wo.sd);
  fmt::print("  first load of the old file: {:6.2f} GB/s (the probe reads it whole first)\n", first_old);
  fmt::print("  xxh3-64 alone, in memory:   {:6.2f} ± {:.2f} GB/s\n", hash.mean, hash.sd);
  fs::remove(with);
  fs::remove(without);
  return 0;
}
