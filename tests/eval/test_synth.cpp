// The synthetic task (lib/eval/synth): seeded and deterministic, answers right, lengths
// long-tailed, rejected completions always wrong for the verifier; and pass@k.
#define BOOST_TEST_MODULE eval_synth
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/files.hpp"
#include "eval/eval.hpp"
#include "eval/synth.hpp"
#include "score/math_expr.hpp"
#include "tests/common/scratch.hpp"

using namespace braid;
using namespace braid::eval;

namespace {

SynthOptions long_tail(std::vector<SynthTask> tasks = {SynthTask::sort}) {
  SynthOptions o;
  o.tasks = std::move(tasks);
  o.min_digits = 2;
  o.max_digits = 16;
  o.tail = 1.5;
  o.seed = 11;
  return o;
}

std::uint64_t value(const std::string& digits) { return std::stoull(digits); }

}  // namespace

BOOST_AUTO_TEST_CASE(the_same_options_give_the_same_items_and_streams_differ) {
  const auto a = synth_items(long_tail(), 1, 300);
  const auto b = synth_items(long_tail(), 1, 300);
  const auto c = synth_items(long_tail(), 2, 300);
  BOOST_REQUIRE_EQUAL(a.size(), 300u);
  int same_as_other_stream = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i].prompt == b[i].prompt);
    BOOST_TEST(a[i].answer == b[i].answer);
    same_as_other_stream += a[i].prompt == c[i].prompt ? 1 : 0;
  }
  BOOST_TEST(same_as_other_stream < 30);  // short items may coincide, most do not
  auto other_seed = long_tail();
  other_seed.seed = 12;
  BOOST_TEST(synth_items(other_seed, 1, 1)[0].prompt + synth_items(other_seed, 1, 2)[1].prompt !=
             a[0].prompt + a[1].prompt);
}

BOOST_AUTO_TEST_CASE(answers_are_right_for_every_task) {
  const auto items = synth_items(long_tail({SynthTask::sort, SynthTask::reverse, SynthTask::add}), 1, 600);
  for (const auto& it : items) {
    BOOST_TEST_CONTEXT(it.prompt << " -> " << it.answer) {
      BOOST_TEST(it.prompt.back() == '=');
      BOOST_TEST(it.answer.size() <= 18u);
      BOOST_TEST(it.answer.front() != '0');
      const std::string body = it.prompt.substr(it.prompt.find(' ') + 1, it.prompt.size() - it.prompt.find(' ') - 2);
      switch (it.task) {
        case SynthTask::sort: {
          BOOST_TEST(std::is_sorted(it.answer.rbegin(), it.answer.rend()));
          std::string a = body, b = it.answer;
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          BOOST_TEST(a == b);
          BOOST_TEST(static_cast<int>(body.size()) == it.digits);
          break;
        }
        case SynthTask::reverse:
          BOOST_TEST(std::string(body.rbegin(), body.rend()) == it.answer);
          break;
        case SynthTask::add: {
          const auto plus = body.find('+');
          BOOST_REQUIRE(plus != std::string::npos);
          BOOST_TEST(value(body.substr(0, plus)) + value(body.substr(plus + 1)) == value(it.answer));
          break;
        }
        case SynthTask::frac:  // not drawn here: frac_items_and_dataset_shapes
          break;
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(lengths_follow_the_clipped_pareto_tail) {
  const auto items = synth_items(long_tail(), 1, 8000);
  int at_least_4 = 0, at_least_8 = 0, longest = 0, shortest = 99;
  for (const auto& it : items) {
    at_least_4 += it.digits >= 4 ? 1 : 0;
    at_least_8 += it.digits >= 8 ? 1 : 0;
    longest = std::max(longest, it.digits);
    shortest = std::min(shortest, it.digits);
  }
  // P(n >= k | n <= 16) = ((2/k)^1.5 - (2/17)^1.5) / (1 - (2/17)^1.5): 0.33 for k = 4, 0.09 for k = 8.
  const double p4 = at_least_4 / 8000.0, p8 = at_least_8 / 8000.0;
  BOOST_TEST(p4 > 0.30);
  BOOST_TEST(p4 < 0.36);
  BOOST_TEST(p8 > 0.075);
  BOOST_TEST(p8 < 0.105);
  BOOST_TEST(shortest == 2);
  BOOST_TEST(longest == 16);
}

BOOST_AUTO_TEST_CASE(a_rejected_completion_is_wrong_for_the_verifier) {
  Rng rng(3, 0);
  for (const auto& it : synth_items(long_tail({SynthTask::sort, SynthTask::add}), 1, 500)) {
    const std::string bad = corrupt_answer(it.answer, rng);
    BOOST_TEST_CONTEXT(it.answer << " vs " << bad) {
      const auto expected = score::parse_math(it.answer);
      BOOST_REQUIRE(expected.has_value());
      BOOST_TEST(score::math_reward(it.answer, *expected) == 1.0);
      BOOST_TEST(score::math_reward(bad, *expected) == 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(write_synth_writes_every_file_with_its_count) {
  const auto dir = test::scratch("synth");
  std::filesystem::remove_all(dir);
  const auto summary = write_synth(long_tail(), {.prompts = 10, .sft = 20, .pairs = 30, .heldout = 5}, dir);
  for (const auto& [name, n] : {std::pair{"prompts.jsonl", 10}, {"sft.jsonl", 20}, {"pairs.jsonl", 30},
                                {"heldout.jsonl", 5}, {"heldout-pairs.jsonl", 5}}) {
    const std::string text = read_text_file((dir / name).string());
    BOOST_TEST(std::count(text.begin(), text.end(), '\n') == n);
    BOOST_TEST(summary["files"][name].get<int>() == n);
  }
  const auto first = json::parse(read_text_file((dir / "heldout.jsonl").string()).substr(0, read_text_file((dir / "heldout.jsonl").string()).find('\n')));
  BOOST_TEST(first["id"].get<std::string>() == "heldout-00000");
  BOOST_TEST(first.contains("answer"));
  BOOST_TEST(first["task"].get<std::string>() == "sort");
  // More SFT examples leave the prompts as they were.
  const std::string prompts = read_text_file((dir / "prompts.jsonl").string());
  write_synth(long_tail(), {.prompts = 10, .sft = 40, .pairs = 30, .heldout = 5}, dir);
  BOOST_TEST(read_text_file((dir / "prompts.jsonl").string()) == prompts);
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused_naming_the_option) {
  auto o = long_tail();
  o.max_digits = 19;
  BOOST_CHECK_EXCEPTION(validate(o), UsageError, [](const UsageError& e) { return std::string(e.what()).find("--max-digits") != std::string::npos; });
  o = long_tail({SynthTask::add});
  o.max_digits = 18;  // a sum may have 19 digits
  BOOST_CHECK_THROW(validate(o), UsageError);
  o = long_tail();
  o.tail = 0;
  BOOST_CHECK_EXCEPTION(validate(o), UsageError, [](const UsageError& e) { return std::string(e.what()).find("--tail") != std::string::npos; });
  o = long_tail();
  o.min_digits = 5;
  o.max_digits = 4;
  BOOST_CHECK_THROW(validate(o), UsageError);
  BOOST_CHECK_THROW(parse_synth_task("multiply"), UsageError);
}

BOOST_AUTO_TEST_CASE(pass_at_k_is_the_unbiased_estimate) {
  BOOST_TEST(pass_at_k(4, 1, 1) == 0.25, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(pass_at_k(4, 0, 4) == 0.0);
  BOOST_TEST(pass_at_k(4, 1, 4) == 1.0);
  BOOST_TEST(pass_at_k(5, 2, 2) == 0.7, boost::test_tools::tolerance(1e-12));  // 1 - C(3,2)/C(5,2)
  BOOST_TEST(pass_at_k(10, 3, 1) == 0.3, boost::test_tools::tolerance(1e-12));
}

// pass@k for every k <= n against C(n−c, k) / C(n, k) computed with exact binomials.
BOOST_AUTO_TEST_CASE(pass_at_k_matches_the_binomial_formula_for_every_k) {
  const auto choose = [](int n, int k) {
    double r = 1;
    for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
    return k < 0 || k > n ? 0.0 : r;
  };
  for (int n = 1; n <= 10; ++n)
    for (int c = 0; c <= n; ++c)
      for (int k = 1; k <= n; ++k) {
        const double want = 1.0 - choose(n - c, k) / choose(n, k);
        BOOST_TEST(pass_at_k(n, c, k) == want, boost::test_tools::tolerance(1e-12));
      }
}

// maj@k: disjoint blocks of k samples, each right when its most frequent answer is right;
// a tie goes to the answer that reached the count first; samples without an answer abstain.
BOOST_AUTO_TEST_CASE(maj_at_k_votes_in_blocks) {
  using Keys = std::vector<std::optional<std::string>>;
  const Keys keys{"1", "2", "2", "1", std::nullopt, "3"};
  const std::vector<bool> right{true, false, false, true, false, false};
  BOOST_TEST(maj_at_k(keys, right, 1) == 2.0 / 6);  // each sample alone; the abstaining one is wrong
  // {1,2}: a tie, 1 first: right; {2,1}: 2 first: wrong; {-,3}: 3: wrong.
  BOOST_TEST(maj_at_k(keys, right, 2) == 1.0 / 3, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(maj_at_k(keys, right, 3) == 0.5);      // {1,2,2}: 2 wins, wrong; {1,-,3}: a tie, 1 first, right
  BOOST_TEST(maj_at_k(keys, right, 6) == 0.0);      // 2 reaches two votes before 1 does
  BOOST_TEST(maj_at_k(keys, right, 7) == 0.0);      // k > n
}

// frac: a reduced fraction in LaTeX, right for the verifier; the GSM8K and MATH shapes carry
// the answer where those datasets do, and a model's response ends the same way.
BOOST_AUTO_TEST_CASE(frac_items_and_dataset_shapes) {
  SynthOptions o;
  o.tasks = {SynthTask::frac};
  o.min_digits = 1;
  o.max_digits = 2;
  o.seed = 4;
  const auto items = synth_items(o, 1, 40);
  Rng rng(1, 2);
  for (const auto& it : items) {
    BOOST_TEST(it.prompt.starts_with("frac "));
    const auto expected = score::parse_math(it.answer);
    BOOST_REQUIRE(expected.has_value());
    // The prompt's fraction has the answer's value.
    const std::string f = it.prompt.substr(5, it.prompt.size() - 6);
    BOOST_TEST(score::math_equal(*score::parse_math(f), *expected), it.prompt << " " << it.answer);
    const std::string bad = corrupt_answer(it.answer, rng);
    BOOST_TEST(!score::math_equal(*score::parse_math(bad), *expected), bad);
  }
  const json gsm = json::parse(prompt_lines({items[0]}, "t-", SynthFormat::gsm8k));
  BOOST_TEST(gsm.contains("question"));
  BOOST_TEST(score::math_reward(gsm["answer"].get<std::string>(), *score::parse_math(items[0].answer)) == 1.0);
  const json math = json::parse(prompt_lines({items[0]}, "t-", SynthFormat::math));
  BOOST_TEST(math.contains("problem"));
  BOOST_TEST(math["solution"].get<std::string>().find("\\boxed{") != std::string::npos);
  const json sft = json::parse(sft_lines({items[0]}, SynthFormat::math));
  BOOST_TEST(score::math_reward(sft["response"].get<std::string>(), *score::parse_math(items[0].answer)) == 1.0);
  BOOST_CHECK_THROW(parse_synth_format("csv"), UsageError);
  o.max_digits = 7;
  BOOST_CHECK_THROW(validate(o), UsageError);
}
