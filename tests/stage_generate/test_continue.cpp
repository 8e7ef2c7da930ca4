// Stopping a generation run and continuing its unfinished samples in a new run
// (what migration does between processes) gives the samples of an uninterrupted run.
#define BOOST_TEST_MODULE generate_continue
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "generate/generate.hpp"
#include "tests/generate/tiny_generation.hpp"

#include <cmath>
#include <map>
#include <vector>

using namespace braid::gen;

namespace {

struct Fixture : braid::test::TinyGenerator {
  Fixture() : TinyGenerator(braid::test::tiny_config({.hidden = 64, .intermediate = 96, .vocab = 40, .positions = 128}),
                            23) {}
};

std::vector<Prompt> prompts(int n) { return braid::test::varied_prompts(n, 11, 40, 0); }

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_stopped_run_continued_gives_the_uninterrupted_samples, Fixture) {
  for (double temperature : {1.0, 0.0}) {
    const GenerateOptions opt{.sampling = {.temperature = temperature, .top_p = 0.9, .seed = 5},
                              .max_batch = 4,
                              .max_new_tokens = 24,
                              .stop_tokens = {3}};
    const auto ps = prompts(12);
    const auto whole = braid::gen::generate(m, ps, opt);

    std::map<std::uint64_t, Sample> got;
    auto collect = [&](Sample&& s) { got[s.sample_id] = std::move(s); };
    std::vector<Prompt> rest;
    braid::gen::Generator g(m, opt);
    int steps = 0;
    g.run(ps, collect, [&](const braid::gen::StepInfo&, std::vector<Prompt>&) { return ++steps == 9; }, &rest);
    BOOST_TEST_REQUIRE(!rest.empty());
    std::size_t partial = 0, waiting = 0;
    for (const Prompt& p : rest) (p.response.empty() ? waiting : partial) += 1;
    BOOST_TEST(partial > 0u);  // some were stopped mid-response,
    BOOST_TEST(waiting > 0u);  // some had not started
    BOOST_TEST(got.size() + rest.size() == ps.size());

    braid::gen::Generator(m, opt).run(rest, collect);
    BOOST_TEST_REQUIRE(got.size() == ps.size());
    float worst = 0;
    for (const Sample& w : whole) {
      const Sample& c = got.at(w.sample_id);
      BOOST_TEST(c.prompt == w.prompt, boost::test_tools::per_element());
      BOOST_TEST(c.response == w.response, boost::test_tools::per_element());
      BOOST_TEST((c.finish == w.finish));
      worst = std::max({worst, max_diff(c.logprobs, w.logprobs), max_diff(c.raw_logprobs, w.raw_logprobs)});
    }
    BOOST_TEST_MESSAGE("largest logprob difference after continuing: " << worst);
    BOOST_TEST(worst <= 1e-5f);
  }
}

// What a migration receiver does: its own run goes on, and continuations stopped in
// another run join it mid-way.
BOOST_FIXTURE_TEST_CASE(continuations_added_to_a_running_run_give_the_uninterrupted_samples, Fixture) {
  GenerateOptions opt{.sampling = {.temperature = 1.0, .top_p = 0.9, .seed = 5},
                      .max_batch = 4,
                      .max_new_tokens = 24,
                      .stop_tokens = {3}};
  const auto ps = prompts(12);
  const auto whole = braid::gen::generate(m, ps, opt);
  const std::vector<Prompt> mine(ps.begin(), ps.begin() + 6), theirs(ps.begin() + 6, ps.end());

  std::map<std::uint64_t, Sample> got;
  auto collect = [&](Sample&& s) { got[s.sample_id] = std::move(s); };
  std::vector<Prompt> moved;
  int steps = 0;
  braid::gen::Generator(m, opt).run(theirs, collect,
                                    [&](const braid::gen::StepInfo&, std::vector<Prompt>&) { return ++steps == 7; },
                                    &moved);
  BOOST_TEST_REQUIRE(!moved.empty());

  opt.reserve_prompt_len = 11;  // the longest prompt of the twelve
  std::vector<Prompt> unused;
  steps = 0;
  braid::gen::Generator(m, opt).run(
      mine, collect,
      [&](const braid::gen::StepInfo& i, std::vector<Prompt>& more) {
        if (++steps == 5) {
          BOOST_TEST(i.running > 0);  // joins a run in progress
          more = moved;
        }
        return false;
      },
      &unused);
  BOOST_TEST_REQUIRE(got.size() == ps.size());
  for (const Sample& w : whole) {
    const Sample& c = got.at(w.sample_id);
    BOOST_TEST(c.response == w.response, boost::test_tools::per_element());
    BOOST_TEST(c.raw_logprobs == w.raw_logprobs, boost::test_tools::tolerance(1e-4f) << boost::test_tools::per_element());
  }
}

BOOST_FIXTURE_TEST_CASE(a_bad_continuation_is_refused, Fixture) {
  const GenerateOptions opt{.max_new_tokens = 4, .stop_tokens = {3}};
  std::vector<Prompt> short_lp{{.sample_id = 1, .tokens = {1}, .response = {2}, .logprobs = {}, .raw_logprobs = {-1}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, short_lp, opt), braid::InputError);
  std::vector<Prompt> full{{.sample_id = 1, .tokens = {1}, .response = {2, 2, 2, 2},
                            .logprobs = {0, 0, 0, 0}, .raw_logprobs = {0, 0, 0, 0}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, full, opt), braid::InputError);
  std::vector<Prompt> stopped{{.sample_id = 1, .tokens = {1}, .response = {3}, .logprobs = {0}, .raw_logprobs = {0}}};
  BOOST_CHECK_THROW(braid::gen::generate(m, stopped, opt), braid::InputError);
}
