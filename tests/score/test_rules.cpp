// Rule rewards on known strings; output names and the config history of scored shards.
#define BOOST_TEST_MODULE score_rules
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "score/rule_reward.hpp"
#include "score/shard_stream.hpp"
#include "tokenizer/tokenizer.hpp"

#include <vector>

using braid::score::RuleReward;

namespace {

void expect_rule_error(const std::string& spec) {
  try {
    RuleReward::parse(spec);
    BOOST_ERROR("rule '" << spec << "' was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.field() == "--reward-rule");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(digits_counts_ascii_digits_among_characters) {
  const auto r = RuleReward::parse("digits");
  BOOST_TEST(r("1234") == 1.0);
  BOOST_TEST(r("12ab") == 0.5);
  BOOST_TEST(r("abc") == 0.0);
  BOOST_TEST(r("") == 0.0);
  BOOST_TEST(r("7\xc3\xa9") == 0.5);  // "7é": two characters, three bytes
  BOOST_TEST(r("\xd9\xa3") == 0.0);   // an Arabic-Indic digit is not ASCII
}

BOOST_AUTO_TEST_CASE(chars_counts_members_of_the_set) {
  const auto r = RuleReward::parse("chars:ab\xc3\xa9");
  BOOST_TEST(r("aab") == 1.0);
  BOOST_TEST(r("abcd") == 0.5);
  BOOST_TEST(r("\xc3\xa9x") == 0.5);
  BOOST_TEST(r("\xff" "a") == 0.5);  // an invalid byte is one character, not in the set
}

BOOST_AUTO_TEST_CASE(length_peaks_at_n_and_floors_at_zero) {
  const auto r = RuleReward::parse("length:4");
  BOOST_TEST(r("abcd") == 1.0);
  BOOST_TEST(r("ab") == 0.5);
  BOOST_TEST(r("abcdef") == 0.5);
  BOOST_TEST(r("abcdefghij") == 0.0);
  BOOST_TEST(r("") == 0.0);
}

BOOST_AUTO_TEST_CASE(regex_matches_anywhere_unless_anchored) {
  BOOST_TEST(RuleReward::parse("regex:[0-9]+")("x42y") == 1.0);
  BOOST_TEST(RuleReward::parse("regex:^[0-9]+$")("x42y") == 0.0);
  BOOST_TEST(RuleReward::parse("regex:^[0-9]+$")("42") == 1.0);
  BOOST_TEST(RuleReward::parse("regex:a:b")("xa:b") == 1.0);  // only the first colon separates
}

BOOST_AUTO_TEST_CASE(bad_rules_name_the_flag) {
  for (const char* spec : {"bogus", "digits:1", "chars:", "length:0", "length:x", "length:3.5", "regex:([", "regex"}) {
    expect_rule_error(spec);
  }
}

BOOST_AUTO_TEST_CASE(rules_read_responses_as_the_byte_tokenizer_decodes_them) {
  const auto tok = braid::tok::load_tokenizer("byte");
  // "12", then EOS: the stop token is no character.
  const std::vector<braid::tok::TokenId> response{'1', '2', *tok->eos()};
  BOOST_TEST(RuleReward::parse("length:2")(tok->decode(response, true)) == 1.0);
  BOOST_TEST(RuleReward::parse("digits")(tok->decode(response, true)) == 1.0);
}

BOOST_AUTO_TEST_CASE(outputs_are_named_after_their_inputs) {
  using braid::score::output_path;
  BOOST_TEST(output_path("out", "runs/gen-00003.h5", "scored") == std::filesystem::path("out/scored-00003.h5"));
  BOOST_TEST(output_path("out", "my-run-12.h5", "s") == std::filesystem::path("out/s-12.h5"));
  BOOST_TEST(output_path("out", "batch.h5", "scored") == std::filesystem::path("out/scored-batch.h5"));
}

BOOST_AUTO_TEST_CASE(config_history_is_carried_forward) {
  const braid::json score{{"stage", "score"}, {"algorithm", "ppo"}};
  const auto a = braid::json::parse(
      braid::score::forward_config(R"({"stage":"generate","samples_per_prompt":4})", score, "g.h5"));
  BOOST_TEST(a["generate"]["samples_per_prompt"] == 4);
  BOOST_TEST(a["score"]["algorithm"] == "ppo");
  // A shard that already carries a history keeps it (and is scored afresh).
  const auto b = braid::json::parse(braid::score::forward_config(a.dump(), {{"stage", "score"}, {"algorithm", "grpo"}}, "s.h5"));
  BOOST_TEST(b["generate"]["samples_per_prompt"] == 4);
  BOOST_TEST(b["score"]["algorithm"] == "grpo");
  BOOST_TEST(braid::json::parse(braid::score::forward_config("", score, "x.h5")).size() == 1);
  BOOST_CHECK_THROW(braid::score::forward_config("[1,2]", score, "x.h5"), braid::InputError);
}
