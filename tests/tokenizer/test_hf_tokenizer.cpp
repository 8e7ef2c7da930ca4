// Expected ids are derived by hand from the merge lists in
// tests/fixtures/tokenizer/make_fixtures.py (ids noted beside each case).
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "tokenizer/hf_tokenizer.hpp"
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
Ids enc(const braid::tok::Tokenizer& t, std::string_view s) { return t.encode(s); }
}  // namespace

// gpt2_style ids: bytes 0..255 are their own value; he 256, ll 257, hell 258,
// hello 259, Ġw 260, or 261, Ġwor 262, ld 263, Ġworld 264, 12 265, 123 266,
// 45 267, <|endoftext|> 268.
BOOST_AUTO_TEST_CASE(gpt2_byte_level_bpe) {
  auto t = braid::tok::load_tokenizer(fixture("gpt2_style"));
  BOOST_TEST(enc(*t, "hello world") == (Ids{259, 264}), boost::test_tools::per_element());
  BOOST_TEST(enc(*t, "hello world!") == (Ids{259, 264, '!'}), boost::test_tools::per_element());
  // o r merges, then nothing joins l+or or or+d.
  BOOST_TEST(enc(*t, "lord") == (Ids{'l', 261, 'd'}), boost::test_tools::per_element());
  // "a  b": the regex keeps one space alone (\s+(?!\S)) and gives the other to "b".
  BOOST_TEST(enc(*t, "a  b") == (Ids{'a', ' ', ' ', 'b'}), boost::test_tools::per_element());
  // Non-ASCII goes byte by byte (é = C3 A9).
  BOOST_TEST(enc(*t, "\xC3\xA9") == (Ids{0xC3, 0xA9}), boost::test_tools::per_element());
  // One regex piece: 1 2 and 4 5 merge independently.
  BOOST_TEST(enc(*t, "4512") == (Ids{267, 265}), boost::test_tools::per_element());
  BOOST_TEST(enc(*t, "hi<|endoftext|>hello") == (Ids{'h', 'i', 268, 259}), boost::test_tools::per_element());
  BOOST_TEST(t->vocab_size() == 269);
  BOOST_TEST(*t->eos() == 268);
}

BOOST_AUTO_TEST_CASE(equal_ranks_merge_leftmost_first_in_long_words) {
  auto t = braid::tok::load_tokenizer(fixture("gpt2_style"));
  // 1001 l's: the pairs (l, l) merge left to right into 500 "ll" (257) and one "l" left over.
  Ids want(500, 257);
  want.push_back('l');
  BOOST_TEST(enc(*t, std::string(1001, 'l')) == want, boost::test_tools::per_element());
  // "hellllo": he, then ll at the leftmost place, then hell; "llo" ends as ll + o.
  BOOST_TEST(enc(*t, "hellllo") == (Ids{258, 257, 'o'}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(llama3_split_regex_then_byte_level) {
  auto t = braid::tok::load_tokenizer(fixture("llama3_style"));
  // \p{N}{1,3} cuts "4512" into "451" + "2", unlike GPT-2's regex above.
  BOOST_TEST(enc(*t, "4512") == (Ids{267, '1', '2'}), boost::test_tools::per_element());
  BOOST_TEST(enc(*t, "hello world") == (Ids{259, 264}), boost::test_tools::per_element());
  // The case-insensitive contraction piece "'S" stays whole: ' then S.
  BOOST_TEST(enc(*t, "IT'S") == (Ids{'I', 'T', '\'', 'S'}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(nfc_normalizer_composes_before_splitting) {
  auto qwen = braid::tok::load_tokenizer(fixture("qwen2_style"));
  auto gpt2 = braid::tok::load_tokenizer(fixture("gpt2_style"));
  const std::string decomposed = "e\xCC\x81";  // e + U+0301 combining acute
  BOOST_TEST(enc(*qwen, decomposed) == (Ids{0xC3, 0xA9}), boost::test_tools::per_element());  // é, composed
  BOOST_TEST(enc(*gpt2, decomposed) == (Ids{'e', 0xCC, 0x81}), boost::test_tools::per_element());
  // NFC keeps compatibility characters (NFKC would turn the ligature into "fi").
  BOOST_TEST(enc(*qwen, "\xEF\xAC\x81") == (Ids{0xEF, 0xAC, 0x81}), boost::test_tools::per_element());
  BOOST_TEST(enc(*qwen, "hello world") == (Ids{259, 264}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(byte_level_round_trips_any_bytes) {
  auto t = braid::tok::load_tokenizer(fixture("gpt2_style"));
  std::string text = "hello world, 12345\n\ttabs  and  spaces \xE2\x96\x81 <|endoftext|> end";
  text.push_back('\xFF');  // invalid UTF-8 survives too
  text.push_back('\0');
  const Ids ids = t->encode(text);
  BOOST_TEST(t->decode(ids, false) == text);
  // Skipping special tokens drops exactly the added token.
  std::string without = text;
  without.erase(without.find("<|endoftext|>"), 13);
  BOOST_TEST(t->decode(ids, true) == without);
}

// llama2_style ids: <unk> 0, <s> 1, </s> 2, <0xNN> 3+NN, ▁ 259, h 260, e 261,
// l 262, o 263, w 264, r 265, d 266, he 267, ll 268, hell 269, hello 270,
// ▁hello 271, ▁w 272, or 273, ▁wor 274, ld 275, ▁world 276.
BOOST_AUTO_TEST_CASE(sentencepiece_bpe_with_byte_fallback) {
  auto t = braid::tok::load_tokenizer(fixture("llama2_style"));
  BOOST_TEST(enc(*t, "hello world") == (Ids{271, 276}), boost::test_tools::per_element());
  // é is not in the vocabulary: its two bytes fall back to <0xC3> <0xA9>.
  BOOST_TEST(enc(*t, "h\xC3\xA9") == (Ids{259, 260, 3 + 0xC3, 3 + 0xA9}), boost::test_tools::per_element());
  // The added token splits the text; each side gets its own ▁ prefix.
  BOOST_TEST(enc(*t, "<s>hello") == (Ids{1, 271}), boost::test_tools::per_element());
  BOOST_TEST(t->decode(Ids{271, 276}) == "hello world");
  BOOST_TEST(t->decode(Ids{1, 259, 260, 3 + 0xC3, 3 + 0xA9, 2}) == "h\xC3\xA9");
  BOOST_TEST(t->decode(Ids{1, 271}, false) == "<s> hello");
  BOOST_TEST(*t->bos() == 1);
  BOOST_TEST(*t->eos() == 2);
  BOOST_TEST(!t->pad().has_value());
}

BOOST_AUTO_TEST_CASE(bad_tokenizer_json_names_every_field) {
  braid::json doc = braid::json::parse(R"({
    "normalizer": {"type": "Lowercase"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}
  })");
  try {
    braid::tok::HfTokenizer t(doc, "bad.json");
    BOOST_FAIL("a bad tokenizer.json was accepted");
  } catch (const braid::InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("normalizer") != std::string::npos);
    BOOST_TEST(msg.find("model.merges[0]") != std::string::npos);
    BOOST_TEST(e.problems().size() == 2u);
  }
}

// Found by fuzz/fuzz_tokenizer (tests/fixtures/fuzz/tokenizer/crash-3400214e...): an optional
// key of the wrong type (here a number where a string belongs) escaped as nlohmann's
// type_error (exit 1); it is now a problem naming the field.
BOOST_AUTO_TEST_CASE(optional_keys_of_the_wrong_type_are_named) {
  braid::json doc = braid::json::parse(R"({
    "pre_tokenizer": {"type": "Metaspace", "replacement": 7, "add_prefix_space": "yes"},
    "decoder": {"type": "Strip", "content": " ", "start": "one", "stop": 0},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}
  })");
  try {
    braid::tok::HfTokenizer t(doc, "bad.json");
    BOOST_FAIL("a tokenizer.json with wrongly typed keys was accepted");
  } catch (const braid::InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("pre_tokenizer.replacement") != std::string::npos);
    BOOST_TEST(msg.find("pre_tokenizer.add_prefix_space") != std::string::npos);
    BOOST_TEST(msg.find("decoder.start") != std::string::npos);
  }
  const std::string kept = std::string(std::getenv("BRAID_FIXTURES")) +
                           "/fuzz/tokenizer/crash-3400214e404f2a633e185a80dc498ac975578da2";
  BOOST_CHECK_THROW(braid::tok::HfTokenizer(braid::load_json_file(kept), kept), braid::InputError);
}

// Found by fuzz/fuzz_tokenizer (tests/fixtures/fuzz/tokenizer/crash-30e3a882...): a text with a
// character the vocabulary lacks, in a tokenizer without unk_token or byte fallback, threw a
// plain runtime_error (exit 1); it is an InputError naming the tokenizer file and its vocabulary.
BOOST_AUTO_TEST_CASE(text_the_vocabulary_cannot_encode_is_an_input_error) {
  braid::json doc = braid::json::parse(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})");
  const braid::tok::HfTokenizer t(doc, "small.json");
  BOOST_TEST(t.encode("ab").size() == 2u);
  try {
    (void)t.encode("abc");
    BOOST_FAIL("a character outside the vocabulary was encoded");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.file() == "small.json");
    BOOST_TEST(e.field() == "model.vocab");
    BOOST_TEST(std::string(e.what()).find("\"c\"") != std::string::npos);
  }
  BOOST_CHECK_THROW((void)t.decode(std::vector<braid::tok::TokenId>{0, 7}, false), braid::InputError);
  const std::string kept = std::string(std::getenv("BRAID_FIXTURES")) +
                           "/fuzz/tokenizer/crash-30e3a8825010fcb35cccd2114273a8653c9b5733";
  const braid::tok::HfTokenizer k(braid::load_json_file(kept), kept);
  BOOST_CHECK_THROW((void)k.encode("Hello, world! 123  caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\n\tend"), braid::InputError);
}
