// Token offsets and prompt + response encoded as one text (tok::encode_joined), with a
// SentencePiece-style and byte-level BPE tokenizers (ids: see test_hf_tokenizer.cpp).
#include <boost/test/unit_test.hpp>

#include "tokenizer/tokenizer.hpp"

#include <cstdlib>
#include <string>
#include <vector>

using braid::tok::TokenId;
using Ids = std::vector<TokenId>;

namespace {
std::string fixture(const std::string& name) {
  return std::string(std::getenv("BRAID_FIXTURES")) + "/tokenizer/" + name;
}
// Each token's [begin, end), flattened: {b0, e0, b1, e1, ...}.
using Spans = std::vector<std::size_t>;
Spans spans_of(const braid::tok::Tokenizer& t, std::string_view text) {
  Spans out;
  for (auto s : t.encode_with_offsets(text).spans) {
    out.push_back(s.begin);
    out.push_back(s.end);
  }
  return out;
}
}  // namespace

// llama2_style: ▁ 259, h 260, ▁hello 271, ▁w 272, ▁wor 274, ld 275, ▁world 276.
BOOST_AUTO_TEST_CASE(sentencepiece_response_has_no_stray_metaspace) {
  auto t = braid::tok::load_tokenizer(fixture("llama2_style"));
  // Encoded alone, " world" gets the prepended ▁ and its own: a stray ▁ token first.
  BOOST_TEST(t->encode(" world") == (Ids{259, 276}), boost::test_tools::per_element());
  // Encoded with its prompt, the boundary is HF's: "▁hello" "▁world".
  const auto j = braid::tok::encode_joined(*t, "hello", " world");
  BOOST_TEST(j.ids == (Ids{271, 276}), boost::test_tools::per_element());
  BOOST_TEST(j.prompt_tokens == 1u);
  // The prepended ▁ counts as the first character; "▁" "▁world" stand for the space and the word.
  BOOST_TEST(spans_of(*t, "hello world") == (Spans{0, 5, 5, 11}), boost::test_tools::per_element());
  BOOST_TEST(spans_of(*t, "h\xC3\xA9") == (Spans{0, 1, 0, 1, 1, 2, 2, 3}), boost::test_tools::per_element());
  // A token across the boundary belongs to the response: "▁world" covers "orld".
  const auto k = braid::tok::encode_joined(*t, "hello w", "orld");
  BOOST_TEST(k.ids == (Ids{271, 276}), boost::test_tools::per_element());
  BOOST_TEST(k.prompt_tokens == 1u);
  // Added tokens keep their place.
  BOOST_TEST(spans_of(*t, "<s>hello") == (Spans{0, 3, 3, 8}), boost::test_tools::per_element());
  const auto a = braid::tok::encode_joined(*t, "hello</s>", "hello");
  BOOST_TEST(a.ids == (Ids{271, 2, 271}), boost::test_tools::per_element());
  BOOST_TEST(a.prompt_tokens == 2u);
}

// gpt2_style / llama3_style: hello 259, Ġw 260, Ġwor 262, ld 263, Ġworld 264, <|endoftext|> 268.
BOOST_AUTO_TEST_CASE(byte_level_boundary_is_that_of_the_whole_text) {
  for (const char* name : {"gpt2_style", "llama3_style"}) {
    BOOST_TEST_CONTEXT(name) {
      auto t = braid::tok::load_tokenizer(fixture(name));
      // Apart, "hello wor" + "ld" would be hello Ġwor | ld; together it is hello Ġworld.
      BOOST_TEST(t->encode("hello wor") == (Ids{259, 262}), boost::test_tools::per_element());
      BOOST_TEST(t->encode("ld") == (Ids{263}), boost::test_tools::per_element());
      const auto j = braid::tok::encode_joined(*t, "hello wor", "ld");
      BOOST_TEST(j.ids == (Ids{259, 264}), boost::test_tools::per_element());
      BOOST_TEST(j.prompt_tokens == 1u);
      BOOST_TEST(spans_of(*t, "hello world") == (Spans{0, 5, 5, 11}), boost::test_tools::per_element());
      // é is two byte tokens, one byte each.
      BOOST_TEST(spans_of(*t, "\xC3\xA9") == (Spans{0, 1, 1, 2}), boost::test_tools::per_element());
      const auto e = braid::tok::encode_joined(*t, "hello", " world<|endoftext|>");
      BOOST_TEST(e.ids == (Ids{259, 264, 268}), boost::test_tools::per_element());
      BOOST_TEST(e.prompt_tokens == 1u);
    }
  }
}

BOOST_AUTO_TEST_CASE(normalized_characters_stand_for_what_they_came_from) {
  // qwen2_style composes e + U+0301 into é: both bytes of é stand for all three input bytes.
  auto t = braid::tok::load_tokenizer(fixture("qwen2_style"));
  BOOST_TEST(spans_of(*t, "he\xCC\x81") == (Spans{0, 1, 1, 4, 1, 4}), boost::test_tools::per_element());
  // The accent is the response: the composed é covers it, so it starts the response.
  const auto j = braid::tok::encode_joined(*t, "he", "\xCC\x81");
  BOOST_TEST(j.ids == (Ids{'h', 0xC3, 0xA9}), boost::test_tools::per_element());
  BOOST_TEST(j.prompt_tokens == 1u);
  // Text NFC leaves alone keeps byte-exact spans.
  BOOST_TEST(spans_of(*t, "hello world") == (Spans{0, 5, 5, 11}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(byte_tokenizer_spans_are_its_bytes) {
  auto t = braid::tok::load_tokenizer("byte");
  BOOST_TEST(spans_of(*t, "ab") == (Spans{0, 1, 1, 2}), boost::test_tools::per_element());
  const auto j = braid::tok::encode_joined(*t, "ab", "c");
  BOOST_TEST(j.prompt_tokens == 2u);
  BOOST_TEST(j.ids.size() == 3u);
}
