// The math verifier: final-answer extraction, number normalisation, the prompt's
// expected answer, and the reward that compares them.
#define BOOST_TEST_MODULE score_math_answer
#include <boost/test/unit_test.hpp>

#include "core/json.hpp"
#include "score/math_answer.hpp"
#include "score/math_expr.hpp"
#include "score/text_reward.hpp"

#include <optional>
#include <string>

using namespace braid;
using namespace braid::score;

namespace {

std::string value_of(std::string_view text) {
  const auto v = parse_number(text);
  return v ? to_string(*v) : "none";
}

std::string answer_of(std::string_view response) { return final_answer(response).value_or("none"); }

std::string expected_of(const std::string& extra_json, std::string* problem = nullptr) {
  std::string p;
  const auto v = expected_answer(json::parse(extra_json), &p);
  if (problem) *problem = p;
  return v ? canonical(*v) : "none";
}

MathValue value(std::string_view text) {
  const auto v = parse_math(text);
  BOOST_REQUIRE_MESSAGE(v.has_value(), "not read: " << text);
  return *v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(numbers_are_normalised_to_exact_rationals) {
  BOOST_TEST(value_of("42") == "42");
  BOOST_TEST(value_of("+42") == "42");
  BOOST_TEST(value_of("-42") == "-42");
  BOOST_TEST(value_of("\xe2\x88\x92" "7") == "-7");  // U+2212 minus
  BOOST_TEST(value_of("1,234,567") == "1234567");
  BOOST_TEST(value_of("42.0") == "42");
  BOOST_TEST(value_of("42.") == "42");
  BOOST_TEST(value_of("2.50") == "5/2");
  BOOST_TEST(value_of(".5") == "1/2");
  BOOST_TEST(value_of("0.125") == "1/8");
  BOOST_TEST(value_of("3/4") == "3/4");
  BOOST_TEST(value_of("6 / 8") == "3/4");
  BOOST_TEST(value_of("-6/8") == "-3/4");
  BOOST_TEST(value_of("\\frac{3}{4}") == "3/4");
  BOOST_TEST(value_of("\\dfrac{10}{4}") == "5/2");
  BOOST_TEST(value_of("-\\tfrac{1}{3}") == "-1/3");
  BOOST_TEST(value_of("\\frac{1.5}{3}") == "1/2");
  BOOST_TEST(value_of("$1,000$") == "1000");
  BOOST_TEST(value_of("\\$18") == "18");
  BOOST_TEST(value_of("\\(12\\)") == "12");
  BOOST_TEST(value_of("50\\%") == "50");
  BOOST_TEST(value_of("1{,}000") == "1000");
  BOOST_TEST(value_of("  7  ") == "7");
  BOOST_TEST(value_of("007") == "7");
  // Not numbers (or not ones compared exactly).
  BOOST_TEST(value_of("") == "none");
  BOOST_TEST(value_of("x+1") == "none");
  BOOST_TEST(value_of("12,34") == "none");      // not groups of three
  BOOST_TEST(value_of("1,2345") == "none");
  BOOST_TEST(value_of("3/0") == "none");
  BOOST_TEST(value_of("\\frac{1}{0}") == "none");
  BOOST_TEST(value_of("\\frac{1}") == "none");
  BOOST_TEST(value_of("1e5") == "none");
  BOOST_TEST(value_of("1234567890123456789012") == "none");  // more than 18 digits
  BOOST_TEST(value_of("12 apples") == "none");
  BOOST_TEST((parse_number("0.5") == parse_number("\\frac{2}{4}")));
  BOOST_TEST((parse_number("1,234.50") == parse_number("+2469/2")));
}

BOOST_AUTO_TEST_CASE(the_final_answer_is_the_hashes_then_the_box_then_the_last_number) {
  BOOST_TEST(answer_of("She has 3*4 = 12 apples.\n#### 12") == "12");
  BOOST_TEST(answer_of("#### 5\nthen later #### 1,234 \nand 99") == "1,234");  // the last ####, to its line's end
  BOOST_TEST(answer_of("So 2+2 = 4 and the answer is $\\boxed{\\frac{3}{4}}$. Check: 7") == "\\frac{3}{4}");
  BOOST_TEST(answer_of("\\boxed{1} and then \\boxed{ 2 }") == "2");
  BOOST_TEST(answer_of("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}");  // nested braces
  BOOST_TEST(answer_of("We get 7 apples, then 9.") == "9");
  BOOST_TEST(answer_of("x = 10-3 = 7") == "7");
  BOOST_TEST(answer_of("it was -5 degrees") == "-5");
  BOOST_TEST(answer_of("from 10-3") == "3");  // an operator, not a sign
  BOOST_TEST(answer_of("a ratio of 3/4 today") == "3/4");
  BOOST_TEST(answer_of("costs 1,250.75 dollars") == "1,250.75");
  BOOST_TEST(answer_of("no number here") == "none");
  BOOST_TEST(answer_of("####   \nthe rest 6") == "6");         // an empty #### marks nothing
  BOOST_TEST(answer_of("\\boxed{unclosed 5") == "5");
  BOOST_TEST(answer_of("") == "none");
}

BOOST_AUTO_TEST_CASE(the_final_answers_value_falls_back_to_its_last_number) {
  const auto v = [](std::string_view r) {
    const auto x = final_answer_value(r);
    return x ? to_string(*x) : "none";
  };
  BOOST_TEST(v("#### 12 apples") == "12");
  BOOST_TEST(v("\\boxed{x = 5}") == "5");
  BOOST_TEST(v("#### twelve") == "none");
  BOOST_TEST(v("The answer: \\boxed{0.75}") == "3/4");
}

BOOST_AUTO_TEST_CASE(the_expected_answer_comes_from_the_prompt_line) {
  BOOST_TEST(expected_of(R"({"answer": 42})") == "42");
  BOOST_TEST(expected_of(R"({"answer": -3})") == "-3");
  BOOST_TEST(expected_of(R"({"answer": 0.25})") == "1/4");
  BOOST_TEST(expected_of(R"({"answer": "1,234"})") == "1234");
  BOOST_TEST(expected_of(R"({"answer": "\\frac{3}{4}"})") == "3/4");
  // GSM8K's answers are the worked solution ending in "#### N".
  BOOST_TEST(expected_of(R"({"answer": "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72"})") == "72");
  BOOST_TEST(expected_of(R"({"answer": "so \\boxed{\\frac{1}{2}}"})") == "1/2");

  std::string problem;
  BOOST_TEST(expected_of(R"({"id": 3})", &problem) == "none");
  BOOST_TEST(problem.find("is missing") == 0u);
  BOOST_TEST(expected_of(R"({"answer": "why?"})", &problem) == "none");
  BOOST_TEST(problem.find("is \"why?\", not a value") == 0u);
  BOOST_TEST(expected_of(R"({"answer": "the sum is 12"})", &problem) == "none");  // no last-number guessing here
  // LaTeX values: MATH's answers as they come.
  BOOST_TEST(expected_of(R"({"answer": "\\sqrt{2}"})") == "1.41421356");
  BOOST_TEST(expected_of(R"({"answer": "(0, 1]"})") == "(0, 1]");
  BOOST_TEST(expected_of(R"({"answer": "the roots are \\boxed{\\{1, -2\\}}"})") == "{-2, 1}");
  BOOST_TEST(expected_of(R"({"answer": [1]})", &problem) == "none");
  BOOST_TEST(problem.find("is [1] (array)") == 0u);
  BOOST_TEST(expected_of(R"({"answer": null})", &problem) == "none");
  BOOST_TEST(problem.find("is null (null)") == 0u);
  BOOST_TEST(expected_of(R"({"answer": 1e300})", &problem) == "none");
  BOOST_TEST(expected_of(R"({"answer": 18446744073709551615})", &problem) == "none");
  BOOST_TEST(problem.find("too large") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_reward_is_one_for_an_equal_final_answer) {
  const MathValue half = value("1/2");
  BOOST_TEST(math_reward("so the answer is 0.5", half) == 1.0);
  BOOST_TEST(math_reward("#### 1/2", half) == 1.0);
  BOOST_TEST(math_reward("$\\boxed{\\dfrac{2}{4}}$", half) == 1.0);
  BOOST_TEST(math_reward("#### 0.50\nbut maybe 7", half) == 1.0);
  BOOST_TEST(math_reward("0.5 or maybe 0.6", half) == 0.0);  // the last number counts
  BOOST_TEST(math_reward("no idea", half) == 0.0);
  BOOST_TEST(math_reward("", half) == 0.0);
  BOOST_TEST(math_reward("The total is 1,234.", value("1234")) == 1.0);
  BOOST_TEST(math_reward("The total is 1234.5", value("1234")) == 0.0);
  BOOST_TEST(math_reward("#### 12 apples", value("12")) == 1.0);  // a number's answer by its last number
  BOOST_TEST(math_reward("so \\boxed{(0, 1)}", value("[0, 1)")) == 0.0);
  BOOST_TEST(math_reward("so \\boxed{[0, 1)}", value("[0, 1)")) == 1.0);
  BOOST_TEST(math_reward("\\boxed{x = \\frac{\\sqrt{3}}{2}}", value("\\frac{\\sqrt3}{2}")) == 1.0);
}

// The table of LaTeX answers the verifier reads as math-verify does: each pair equal by
// value and structure, or not.
BOOST_AUTO_TEST_CASE(latex_answers_compare_by_value_and_structure) {
  struct Case {
    const char* a;
    const char* b;
    bool equal;
  };
  const Case cases[] = {
      // fractions and decimals
      {"\\frac{1}{2}", "0.5", true},
      {"\\dfrac{3}{6}", "1/2", true},
      {"\\frac12", "\\tfrac{1}{2}", true},
      {"\\frac{1}{3}", "0.333", false},
      {"-\\frac{3}{4}", "\\frac{-3}{4}", true},
      {"\\left(\\frac{1}{2}\\right)", "0.5", true},
      // roots
      {"\\sqrt{2}", "2^{1/2}", true},
      {"\\sqrt2", "\\sqrt{2}", true},
      {"3\\sqrt{2}", "\\sqrt{18}", true},
      {"\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}", true},
      {"\\sqrt[3]{8}", "2", true},
      {"\\sqrt{8}", "2\\sqrt{3}", false},
      // pi and constants
      {"2\\pi", "2 \\cdot \\pi", true},
      {"\\frac{\\pi}{2}", "1.5707963", true},
      {"\\pi", "3.14", false},
      {"\xcf\x80", "\\pi", true},
      // intervals: the brackets count
      {"(0, 1]", "(0,1]", true},
      {"(0, 1]", "[0, 1]", false},
      {"[2, \\infty)", "[2,\\infty)", true},
      {"(-\\infty, 3) \\cup (4, 5]", "(4, 5] \\cup (-\\infty, 3)", true},
      {"(-\\infty, 3) \\cup (4, 5]", "(-\\infty, 3) \\cup [4, 5]", false},
      // sets: order ignored; tuples: order kept
      {"\\{1, 2, 3\\}", "\\{3, 1, 2\\}", true},
      {"\\{1, 2\\}", "\\{1, 2, 3\\}", false},
      {"1, 2", "2, 1", true},
      {"(1, 2)", "(1,2)", true},
      {"(1, 2)", "(2, 1)", false},
      {"(1, 2, 3)", "(1, 2, 3)", true},
      // units and decoration stripped
      {"5\\text{ cm}", "5", true},
      {"90^\\circ", "90", true},
      {"90^{\\circ}", "90\xc2\xb0", true},
      {"\\$5.00", "5", true},
      {"50\\%", "50", true},
      {"12\\mbox{ inches}", "12", true},
      {"\\text{12}", "12", true},
      {"$\\displaystyle 4$", "4", true},
      // expressions with variables: equal at every point
      {"x + 1", "1 + x", true},
      {"2x", "x + x", true},
      {"(x+1)^2", "x^2 + 2x + 1", true},
      {"x^2", "x^3", false},
      {"y = 2x + 1", "2x + 1", true},
      {"\\frac{1}{x}", "x^{-1}", true},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.a << " vs " << c.b) {
      const MathValue a = value(c.a), b = value(c.b);
      BOOST_TEST(math_equal(a, b) == c.equal);
      BOOST_TEST(math_equal(b, a) == c.equal);
      // Equal values vote alike (an exact value and a rounded one may not: 1.5707963 is no π/2).
      if (c.equal && a.kind != MathValue::Kind::function && a.exact.has_value() == b.exact.has_value()) {
        BOOST_TEST(canonical(a) == canonical(b));
      }
    }
  }
  // Not values.
  for (const char* text : {"", "why?", "\\frac{1}{0}", "\\sqrt{-4}", "(1, 2", "\\unknown{3}", "1 \\pm 2", "the sum is 12",
                           "1e5", "2.5E-3", "apples"}) {
    BOOST_TEST(!parse_math(text).has_value(), text);
  }
  // \boxed{} with nested braces is the final answer.
  BOOST_TEST(math_reward("thus $\\boxed{\\frac{\\sqrt{2}}{\\sqrt{8}}}$.", value("1/2")) == 1.0);
  BOOST_TEST(answer_key("so \\boxed{\\dfrac{2}{4}}").value_or("") == "1/2");
  BOOST_TEST(answer_key("#### 0.50").value_or("") == "1/2");
  BOOST_TEST(answer_key("nothing").has_value() == false);
}

BOOST_AUTO_TEST_CASE(the_math_rule_scores_batches_and_names_lines_without_answers) {
  auto rule = make_rule_reward("math");
  BOOST_TEST(rule->config() == (json{{"rule", "math"}}));
  std::vector<TextSample> samples(4);
  samples[0] = {.sample_id = 0, .prompt = "2+2=", .response = "#### 4", .extra = {{"answer", 4}}, .has_origin = true,
                .where = "p.jsonl:1"};
  samples[1] = {.sample_id = 1, .prompt = "2+2=", .response = "5", .extra = {{"answer", 4}}, .has_origin = true,
                .where = "p.jsonl:1"};
  samples[2] = {.sample_id = 2, .prompt = "3/6=", .response = "\\boxed{1/2}", .extra = {{"answer", "\\frac{1}{2}"}},
                .has_origin = true, .where = "p.jsonl:3"};
  samples[3] = samples[2];
  samples[3].response = "0.5.";
  BOOST_TEST(rule->problems(samples).empty());
  const auto r = rule->score(samples);
  BOOST_TEST(r == (std::vector<double>{1, 0, 1, 1}), boost::test_tools::per_element());

  // Two samples of one bad line: one problem; a shard without origins: one problem.
  samples[0].extra = json::object();
  samples[1].extra = json::object();
  samples[2].extra = {{"answer", "many"}};
  auto problems = rule->problems(samples);
  BOOST_TEST_REQUIRE(problems.size() == 2u);
  BOOST_TEST(problems[0].find("p.jsonl:1: answer: is missing") == 0u);
  BOOST_TEST(problems[1].find("p.jsonl:3: answer: is \"many\", not a value") == 0u);
  for (auto& s : samples) {
    s.has_origin = false;
    s.where = "gen-00002.h5: sample " + std::to_string(s.sample_id);
  }
  problems = rule->problems(samples);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("/prompt/extra: is missing") == 0u);
}

BOOST_AUTO_TEST_CASE(a_prompt_file_is_checked_for_answers_line_by_line) {
  const auto problems = math_prompt_problems(
      "{\"prompt\": \"a\", \"answer\": 1}\n\nnot json\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\", \"answer\": \"?\"}\n"
      "{\"prompt\": \"d\"}\n",
      "p.jsonl", 4);
  BOOST_TEST_REQUIRE(problems.size() == 2u);  // line 3 is braid-generate's to report; line 6 is past the limit
  BOOST_TEST(problems[0].find("p.jsonl:4: answer: is missing") == 0u);
  BOOST_TEST(problems[1].find("p.jsonl:5: answer: is \"?\"") == 0u);
}
