// The JSON Checker reports every problem of a config at once, each with its
// field path, so that a user fixes a file in one go.
#define BOOST_TEST_MODULE json_checker
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "core/json.hpp"

using namespace braid;

namespace {

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("BRAID_FIXTURES");
  return std::string(dir != nullptr ? dir : "tests/fixtures") + "/core/" + name;
}

// Validates a schedspec-like document the way a tool would; returns the checker.
Checker validate(const std::string& path) {
  const json doc = load_json_file(path);
  Checker c(path);
  c.format(doc, "braid.schedspec", 1);
  c.integer(doc, "", "devices", {.min = 1});
  c.number(doc, "", "mem_capacity", {.min = 0, .exclusive_min = true});
  c.integer(doc, "", "seed", {}, 0);
  c.no_unknown_keys(doc, "", {"format", "version", "devices", "mem_capacity", "seed", "models"});
  for (const auto& [where, m] : c.array_items(doc, "", "models", 1)) {
    c.string(*m, where, "name");
    const auto stages = c.integer(*m, where, "stages", {.min = 1});
    c.number_or_list(*m, where, "fwd", static_cast<std::size_t>(stages.value_or(1)), {.min = 0});
    c.number_or_list(*m, where, "bwd", static_cast<std::size_t>(stages.value_or(1)), {.min = 0});
  }
  return c;
}

bool has(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p == text; });
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_good_config_has_no_problems) {
  const auto c = validate(fixture("config_good.json"));
  BOOST_TEST(c.ok());
  BOOST_CHECK_NO_THROW(c.check());
}

BOOST_AUTO_TEST_CASE(every_problem_is_listed_with_its_field) {
  const auto c = validate(fixture("config_many_problems.json"));
  const auto& p = c.problems();
  BOOST_TEST_INFO("problems: " << p.size());
  BOOST_TEST(has(p, "version: is 3, this braid reads versions up to 1"));
  BOOST_TEST(has(p, "devices: is 0, must be >= 1"));
  BOOST_TEST(has(p, "mem_capacity: expected a number, found a string"));
  BOOST_TEST(has(p, "sedd: unknown key (did you mean \"seed\"?)"));
  BOOST_TEST(has(p, "models[0].fwd[2]: is -1, must be >= 0"));
  BOOST_TEST(has(p, "models[0].bwd: missing (required)"));
  BOOST_TEST(has(p, "models[1].stages: expected an integer, found a string"));
  BOOST_TEST(p.size() == 7u);
}

BOOST_AUTO_TEST_CASE(check_throws_one_input_error_listing_them_all) {
  const auto path = fixture("config_many_problems.json");
  const auto c = validate(path);
  try {
    c.check();
    BOOST_FAIL("check() did not throw");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(e.file() == path);
    BOOST_TEST(e.problems().size() == 7u);
    BOOST_TEST(msg.find(path + ": 7 problems") == 0u);
    BOOST_TEST(msg.find("\n  devices: is 0, must be >= 1") != std::string::npos);
    BOOST_TEST(msg.find("\n  models[1].stages:") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_syntax_error_names_line_and_column) {
  const auto path = fixture("config_syntax_error.json");
  try {
    load_json_file(path);
    BOOST_FAIL("a broken file parsed");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(path + ": line 4, column") == 0u);
    BOOST_TEST(msg.find("not valid JSON") != std::string::npos);
  }
}

// Found by fuzz/fuzz_model_config (tests/fixtures/fuzz/json/number_overflow.json): a number
// beyond double's range made nlohmann throw out_of_range, which escaped as an internal error.
BOOST_AUTO_TEST_CASE(a_number_beyond_double_is_an_input_error) {
  for (const std::string text : {"[1e309]", R"({"hidden_size": -1e400})"}) {
    try {
      parse_json_text(text, "doc.json");
      BOOST_FAIL("an overflowing number parsed: " + text);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      BOOST_TEST(msg.find("doc.json") == 0u);
      BOOST_TEST(msg.find("not valid JSON: number overflow") != std::string::npos);
    }
  }
  const auto path = fixture("../fuzz/json/number_overflow.json");
  BOOST_CHECK_THROW(load_json_file(path), InputError);
}

// A document nested 100,000 deep parsed (nlohmann's parser keeps its own stack) and then
// crashed its reader by a stack overflow in a recursive copy, comparison or dump. Depth past
// kMaxJsonDepth is refused where it starts; brackets inside strings do not count.
BOOST_AUTO_TEST_CASE(nesting_past_the_limit_is_an_input_error_naming_where) {
  const std::string deep = "{\"a\": 1,\n \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  try {
    parse_json_text(deep, "deep.json");
    BOOST_FAIL("a document nested 100,000 deep parsed");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("deep.json: line 2, column") == 0u, msg);
    BOOST_TEST(msg.find("nested deeper than 512 levels") != std::string::npos, msg);
  }
  BOOST_TEST(parse_json_or_discarded(deep).is_discarded());
  BOOST_CHECK_THROW(parse_ordered_json_text(deep, "deep.json"), InputError);
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  BOOST_TEST(parse_json_text(at_limit, "ok.json").is_array());
  BOOST_TEST(!json_depth_problem(at_limit).has_value());
  BOOST_TEST(json_depth_problem("[" + at_limit + "]").has_value());
  // Brackets in strings, escaped quotes included, are text.
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  BOOST_TEST(parse_json_text(in_string, "s.json").at(0).get<std::string>().size() == 2001u);
}

BOOST_AUTO_TEST_CASE(typed_reads_return_values_and_defaults) {
  const json doc = json::parse(R"({"a": 3, "b": 2.5, "c": "x", "d": true, "e": [1, 2], "f": 4.0})");
  Checker c("inline");
  BOOST_TEST(c.integer(doc, "", "a").value() == 3);
  BOOST_TEST(c.integer(doc, "", "f").value() == 4);  // 4.0 is an integer value
  BOOST_TEST(c.number(doc, "", "b").value() == 2.5);
  BOOST_TEST(c.string(doc, "", "c", {"x", "y"}).value() == "x");
  BOOST_TEST(c.boolean(doc, "", "d").value());
  BOOST_TEST(c.integer(doc, "", "missing", {}, 9).value() == 9);
  BOOST_TEST((c.number_or_list(doc, "", "e", 2).value() == std::vector<double>{1, 2}));
  BOOST_TEST((c.number_or_list(doc, "", "b", 3).value() == std::vector<double>{2.5, 2.5, 2.5}));
  BOOST_TEST(c.ok());
  BOOST_TEST(!c.string(doc, "", "c", {"y", "z"}).has_value());
  BOOST_TEST(!c.number_or_list(doc, "", "e", 3).has_value());
  BOOST_TEST(c.problems().size() == 2u);
  BOOST_TEST(c.problems()[0] == "c: is \"x\", expected one of: y, z");
  BOOST_TEST(c.problems()[1] == "e: has 2 values, expected 3 (one per stage)");
}
