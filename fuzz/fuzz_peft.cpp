// A PEFT adapter folder's adapter_config.json (lib/hf/peft: what braid import reads before the
// base and the weights), and the names of its tensors (each key of the document as one).
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "hf/peft.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    const braid::json doc = braid::parse_json_text(text, "fuzz");
    if (doc.is_object()) {
      for (const auto& item : doc.items()) (void)braid::hf::braid_adapter_name(item.key());
    }
    (void)braid::hf::parse_adapter_config(doc, "fuzz");
  });
  return 0;
}
