// Model configs: sizes out of the documented ranges are refused naming the file and
// the field (a hidden_size of 2^40 used to wrap to a bad int and end as an internal error).
#include <boost/test/unit_test.hpp>

#include <string>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json.hpp"
#include "model/config.hpp"
#include "tests/common/input_error.hpp"

using namespace braid;

namespace {

const char* kTiny = R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "vocab_size": 100})";

std::string refusal(const std::string& key, const std::string& value) {
  json doc = json::parse(kTiny);
  doc[key] = json::parse(value);
  return test::error_of([&] { model::parse_config(doc, "config.json"); }, "config.json");
}

}  // namespace

BOOST_AUTO_TEST_CASE(config_sizes_have_sane_ranges) {
  BOOST_TEST(model::parse_config(json::parse(kTiny), "config.json").hidden_size == 64);
  BOOST_TEST(refusal("hidden_size", "1099511627776") ==
             "config.json: hidden_size: is 1099511627776, must be <= 65536");
  BOOST_TEST(refusal("num_hidden_layers", "5000") == "config.json: num_hidden_layers: is 5000, must be <= 1024");
  BOOST_TEST(refusal("vocab_size", "1e300") == "config.json: vocab_size: expected an integer, found a number");
  BOOST_TEST(refusal("intermediate_size", "4294967296") ==
             "config.json: intermediate_size: is 4294967296, must be <= 1048576");
  BOOST_TEST(refusal("max_position_embeddings", "100000000") ==
             "config.json: max_position_embeddings: is 100000000, must be <= 16777216");
  BOOST_TEST(refusal("rms_norm_eps", "2") == "config.json: rms_norm_eps: is 2, must be <= 1");
}

// The special ids a config gives transformers' generation (braid exports them): ids of the
// vocabulary or null; eos_token_id also a list. Any value was taken, a boolean or 2^40 too.
BOOST_AUTO_TEST_CASE(special_token_ids_are_ids_of_the_vocabulary) {
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    BOOST_TEST(refusal(key, "99").empty());
    BOOST_TEST(refusal(key, "null").empty());
    BOOST_TEST(refusal(key, "100") == fmt::format("config.json: {}: is 100, must be <= 99", key));
    BOOST_TEST(refusal(key, "-1") == fmt::format("config.json: {}: is -1, must be >= 0", key));
    BOOST_TEST(refusal(key, "true") == fmt::format("config.json: {}: expected an integer, found a boolean", key));
    BOOST_TEST(refusal(key, "1099511627776") == fmt::format("config.json: {}: is 1099511627776, must be <= 99", key));
  }
  BOOST_TEST(refusal("eos_token_id", "[2, 3]").empty());
  BOOST_TEST(refusal("eos_token_id", "[2, 100]") ==
             "config.json: eos_token_id[1]: must be a token id in [0, 99] (vocab_size - 1)");
  // A null model_type names no family: refused, not read as llama.
  BOOST_TEST(refusal("model_type", "null").find("model_type: null is not a family") != std::string::npos);
}
