// The Hugging Face tokenizer.json loader (lib/tokenizer); a loaded tokenizer also encodes and
// decodes a fixed text, so that a tokenizer that loads but is inconsistent is exercised.
#include "fuzz/fuzz_common.hpp"
#include "core/json.hpp"
#include "tokenizer/hf_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = braid::fuzz::as_text(data, size);
  braid::fuzz::expect_documented_errors([&] {
    const auto doc = braid::parse_json_text(text, "fuzz");
    braid::tok::HfTokenizer tok(doc, "fuzz");
    // A character the vocabulary lacks, without unk_token or byte fallback, is an InputError
    // naming the tokenizer file (tests/fixtures/fuzz/tokenizer/crash-30e3a882...).
    const auto ids = tok.encode("Hello, world! 123  caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\n\tend");
    (void)tok.decode(ids, false);
    (void)tok.decode(ids, true);
  });
  return 0;
}
