// The sample-shard reader (braid.samples HDF5 files) on arbitrary bytes.
#include "fuzz/fuzz_common.hpp"
#include "io/sample_shard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = braid::fuzz::write_input(data, size, ".h5");
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::io::probe_sample_shard(path);
  });
  braid::fuzz::expect_documented_errors([&] {
    auto shard = braid::io::read_sample_shard(path);
    (void)shard;
  });
  return 0;
}
