// The model-config reader (lib/model, a Hugging Face config.json).
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "model/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    (void)braid::model::parse_config(braid::parse_json_text(text, "fuzz"), "fuzz");
  });
  return 0;
}
