// Model configs: sizes out of the documented ranges are refused naming the file and
// the field (a hidden_size of 2^40 used to wrap to a bad int and end as an internal error).
#include <boost/test/unit_test.hpp>

#include <string>

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
