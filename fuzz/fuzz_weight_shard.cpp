// The weight-shard reader (braid.weights HDF5 files): open, then read every tensor.
#include "fuzz/fuzz_common.hpp"
#include "io/weight_shard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = braid::fuzz::write_input(data, size, ".h5");
  braid::fuzz::expect_documented_errors([&] {
    braid::io::WeightShardReader reader(path);
    for (const auto& name : reader.names()) {
      (void)reader.shape(name);
      (void)reader.read(name);
    }
  });
  return 0;
}
