// The schedule-spec reader (lib/sched, schedgen's input).
#include "fuzz/fuzz_common.hpp"
#include "sched/problem.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] { (void)braid::sched::parse_schedspec(text, "fuzz"); });
  return 0;
}
