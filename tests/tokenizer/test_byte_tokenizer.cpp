#define BOOST_TEST_MODULE tokenizer
#include <boost/test/unit_test.hpp>

#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <vector>

using braid::tok::ByteTokenizer;
using braid::tok::TokenId;

BOOST_AUTO_TEST_CASE(byte_ids_are_the_bytes) {
  ByteTokenizer t;
  const std::vector<TokenId> want{'h', 'i', 0xC3, 0xA9, 0};
  const auto got = t.encode(std::string_view("hi\xC3\xA9\0", 5));
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_byte_round_trips) {
  ByteTokenizer t;
  std::string all;
  for (int b = 255; b >= 0; --b) all.push_back(static_cast<char>(b));
  BOOST_TEST(t.decode(t.encode(all)) == all);
}

BOOST_AUTO_TEST_CASE(special_ids_are_documented_values) {
  ByteTokenizer t;
  BOOST_TEST(*t.bos() == 256);
  BOOST_TEST(*t.eos() == 257);
  BOOST_TEST(*t.pad() == 258);
  BOOST_TEST(t.vocab_size() == 259);
  const std::vector<TokenId> ids{256, 'a', 257, 258, 300};
  BOOST_TEST(t.decode(ids) == "a");
  BOOST_TEST(t.decode(ids, false) == "<|bos|>a<|eos|><|pad|><|id:300|>");
}

BOOST_AUTO_TEST_CASE(load_tokenizer_defaults_to_bytes) {
  auto t = braid::tok::load_tokenizer("byte");
  BOOST_TEST(t->describe() == "byte");
  BOOST_TEST(t->encode("A").at(0) == 65);
}
