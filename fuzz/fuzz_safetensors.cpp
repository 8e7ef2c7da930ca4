// The safetensors reader (lib/hf): open, then read every tensor as float.
#include "fuzz/fuzz_common.hpp"
#include "hf/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = braid::fuzz::write_input(data, size, ".safetensors");
  braid::fuzz::expect_documented_errors([&] {
    braid::hf::SafetensorsReader reader(path);
    for (const auto& name : reader.names()) {
      (void)reader.read(name);
    }
  });
  return 0;
}
