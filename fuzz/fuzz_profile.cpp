// The profile reader (lib/plan, braid-profile's output read by meshplan).
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "plan/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::plan::profile_from_json(braid::parse_json_text(text, "fuzz"), "fuzz");
  });
  return 0;
}
