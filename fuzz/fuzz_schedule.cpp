// The schedule reader (lib/sched, schedgen's output read back by meshplan and dry runs).
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "sched/schedule_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::sched::load_schedule(braid::parse_json_text(text, "fuzz"), "fuzz");
  });
  return 0;
}
