// The experiment and cluster readers (lib/plan, meshplan's inputs).
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "plan/experiment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::plan::experiment_from_json(braid::parse_json_text(text, "fuzz"), "fuzz");
  });
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::plan::cluster_from_json(braid::parse_json_text(text, "fuzz"), "fuzz");
  });
  return 0;
}
