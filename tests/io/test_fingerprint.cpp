#define BOOST_TEST_MODULE fingerprint
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "io/fingerprint.hpp"
#include "io/sample_shard.hpp"
#include "tests/common/scratch.hpp"

using namespace braid;
using namespace braid::io;
using braid::test::scratch;

namespace {

std::filesystem::path text_file(const std::string& name, const std::string& text) {
  const auto p = scratch(name);
  std::ofstream(p) << text;
  return p;
}

bool has_line(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

MadeFrom record(const std::string& lr, const std::filesystem::path& data) {
  MadeFrom m("braid-train sft");
  m.set_options({{"--lr", cli::canonical_value(lr)}, {"--epochs", "1"}}, {"--lr"});
  m.add_input("data", {data});
  m.add_input_value("tokenizer", "byte");
  m.set_output("actor");
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(numbers_compare_by_value_not_by_spelling) {
  BOOST_TEST(cli::canonical_value("1e-3") == cli::canonical_value("0.001"));
  BOOST_TEST(cli::canonical_value("1e-05") == cli::canonical_value("0.00001"));
  BOOST_TEST(cli::canonical_value("2") == cli::canonical_value("2.0"));
  BOOST_TEST(cli::canonical_value("ppo") == "ppo");
  // A flag given ("true", "false" for its --no- form) reads as its default is written.
  BOOST_TEST(cli::canonical_value("true") == "1");
  BOOST_TEST(cli::canonical_value("false") == "0");
  BOOST_TEST(cli::canonical_value("1e-3") != cli::canonical_value("2e-3"));
}

BOOST_AUTO_TEST_CASE(same_inputs_and_options_give_the_same_fingerprint_wherever_the_input_lies) {
  const auto a = text_file("data_a.jsonl", "{\"text\": \"1 2 3\"}\n");
  const auto moved = text_file("moved.jsonl", "{\"text\": \"1 2 3\"}\n");
  const auto there = record("1e-3", a).to_json();
  BOOST_TEST(there["fingerprint"].get<std::string>().starts_with("xxh3-64:"));
  BOOST_TEST(made_from_differences(there, record("0.001", a).to_json()).empty());
  // The digest, not the path: the same content elsewhere is the same input.
  BOOST_TEST(record("1e-3", moved).fingerprint() == record("1e-3", a).fingerprint());
}

BOOST_AUTO_TEST_CASE(each_difference_is_named) {
  const auto a = text_file("data_a.jsonl", "{\"text\": \"1 2 3\"}\n");
  const auto b = text_file("data_b.jsonl", "{\"text\": \"4 5\"}\n");
  const auto there = record("1e-3", a).to_json();

  const auto lr = made_from_differences(there, record("2e-3", a).to_json());
  BOOST_TEST(lr.size() == 1u);
  BOOST_TEST(has_line(lr, "option --lr: 0.001 there, 0.002 now"));

  const auto data = made_from_differences(there, record("1e-3", b).to_json());
  BOOST_TEST(data.size() == 1u);
  BOOST_TEST(has_line(data, "input data: " + a.string() + " there, " + b.string() + " now, with other contents"));

  // The same path with other contents.
  const auto c = text_file("data_c.jsonl", "{\"text\": \"1\"}\n");
  const auto before = record("1e-3", c).to_json();
  text_file("data_c.jsonl", "{\"text\": \"2\"}\n");
  BOOST_TEST(has_line(made_from_differences(before, record("1e-3", c).to_json()), "input data: " + c.string() + " differs"));

  MadeFrom critic = record("1e-3", a);
  critic.set_output("critic");
  BOOST_TEST(has_line(made_from_differences(there, critic.to_json()), "output: actor there, critic now"));
  MadeFrom dpo("braid-train dpo");
  BOOST_TEST(has_line(made_from_differences(there, dpo.to_json()), "tool: braid-train sft there, braid-train dpo now"));
}

BOOST_AUTO_TEST_CASE(an_input_from_stdin_matches_nothing) {
  MadeFrom m("braid-train sft");
  m.add_input_stdin("data");
  const auto rec = m.to_json();
  const auto lines = made_from_differences(rec, rec);
  BOOST_TEST(has_line(lines, "input data: read from standard input"));
}

BOOST_AUTO_TEST_CASE(a_sealed_file_is_known_by_its_contents) {
  SampleBatch b;
  b.logprobs_actor.emplace();
  b.add(std::vector<std::int32_t>{1, 2, 3}, 1, 7);
  const auto p = scratch("shard.h5");
  write_sample_shard(p, b, {});
  const std::string first = content_digest(p);
  BOOST_TEST(content_digest(p) == first);
  (*b.logprobs_actor)[2] = -1.0f;
  write_sample_shard(p, b, {});
  BOOST_TEST(content_digest(p) != first);
  BOOST_CHECK_THROW(content_digest(scratch("not-there.h5")), InputError);
}

BOOST_AUTO_TEST_CASE(a_record_that_is_not_one_is_refused_by_name) {
  BOOST_TEST(!parse_made_from("", "f.h5").has_value());
  BOOST_TEST(parse_made_from(record("1e-3", text_file("d.jsonl", "x")).to_json().dump(), "f.h5").has_value());
  for (const char* bad : {"{", "[]", "{\"tool\": 3, \"options\": {}, \"inputs\": {}}", "{\"tool\": \"t\"}",
                          "{\"tool\": \"t\", \"options\": {\"--lr\": 1}, \"inputs\": {}}",
                          "{\"tool\": \"t\", \"options\": {}, \"inputs\": {\"data\": [{\"file\": 1}]}}",
                          "{\"tool\": \"t\", \"options\": {}, \"inputs\": {}, \"given\": [null]}"}) {
    BOOST_TEST_INFO(bad);
    try {
      parse_made_from(bad, "f.h5");
      BOOST_ERROR("accepted");
    } catch (const InputError& e) {
      BOOST_TEST(std::string(e.what()).find("f.h5") != std::string::npos);
      BOOST_TEST(std::string(e.what()).find("made_from") != std::string::npos);
    }
  }
}

// A JSON output's record is also checked against its fingerprint: one changed after it was
// written (an option deleted or rewritten) is named; a record nested 100,000 deep is not one.
BOOST_AUTO_TEST_CASE(a_record_changed_after_it_was_written_does_not_match_its_fingerprint) {
  ordered_json good = record("1e-3", text_file("d.jsonl", "x")).to_json();
  BOOST_TEST(!braid::made_from_problem(good).has_value());
  ordered_json changed = good;
  changed["options"]["--lr"] = "0.01";
  BOOST_TEST(braid::made_from_problem(changed).value_or("").find("fingerprint: is") == 0u);
  changed = good;
  changed.erase("fingerprint");
  BOOST_TEST(braid::made_from_problem(changed).has_value());
  changed = good;
  changed["options"]["--lr"] = 0.01;
  BOOST_TEST(braid::made_from_problem(changed).value_or("").find("is not a record") == 0u);
  const std::string deep = "{\"tool\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  BOOST_CHECK_THROW(parse_made_from(deep, "f.h5"), InputError);
}
