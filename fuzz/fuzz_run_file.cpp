// The run-file reader (lib/driver, `braid run`'s run.json).
#include "fuzz/fuzz_common.hpp"
#include "driver/run_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& path = braid::fuzz::write_input(data, size, ".json");
  braid::fuzz::expect_documented_errors([&] { (void)braid::driver::load_run_file(path); });
  return 0;
}
