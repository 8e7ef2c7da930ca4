// The external scorer's protocol (--reward-cmd): lines out, rewards back, one process
// for the run, and every way a scorer can fail named by --reward-cmd and its command.
#define BOOST_TEST_MODULE score_scorer_process
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "core/json.hpp"
#include "score/scorer_process.hpp"
#include "score/text_reward.hpp"
#include "tests/common/scratch.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

using namespace braid;
using namespace braid::score;

namespace {

std::vector<std::string> lines(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(json{{"i", i}}.dump());
  return out;
}

// The message of the InputError that exchanging `n` lines with `command` throws ("" when none).
std::string failure(const std::string& command, std::size_t n = 3, double timeout = 20) {
  ScorerProcess p({.command = command, .timeout_seconds = timeout});
  try {
    p.exchange(lines(n));
    p.finish();
  } catch (const InputError& e) {
    BOOST_TEST(e.field() == "--reward-cmd");
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(one_process_answers_every_batch_in_order) {
  // Each answer is twice the line's "i"; a counter file shows one start. (Not awk: mawk
  // reads its input in blocks and would wait for more lines before answering.)
  const auto dir = test::fresh_scratch("one_process");
  ScorerProcess p({.command = "echo started >> starts.txt; while read l; do i=${l#*:}; echo $(( ${i%\\}} * 2 )); done",
                   .dir = dir.string()});
  BOOST_TEST(!p.started());
  BOOST_TEST(p.exchange(lines(3)) == (std::vector<double>{0, 2, 4}), boost::test_tools::per_element());
  BOOST_TEST(p.exchange(lines(2)) == (std::vector<double>{0, 2}), boost::test_tools::per_element());
  BOOST_TEST(p.exchange({}).empty());
  BOOST_TEST(p.finish());
  std::ifstream starts(dir / "starts.txt");  // it ran in --reward-cmd-dir, once
  std::string all((std::istreambuf_iterator<char>(starts)), {});
  BOOST_TEST(all == "started\n");
}

BOOST_AUTO_TEST_CASE(a_large_batch_does_not_fill_the_pipes) {
  // 500 lines of ~2 KB, each answered by ~2 KB (its padding as spaces, then its "i"): 1 MB
  // each way, far beyond a pipe's 64 KB. Writing every line before reading any answer
  // would deadlock: the scorer stops reading when its answers fill their pipe.
  // (sed -u reads a byte at a time: larger batches only make the test slow.)
  std::vector<std::string> big;
  for (int i = 0; i < 500; ++i) big.push_back(json{{"i", i}, {"pad", std::string(2000, 'x')}}.dump());
  ScorerProcess p({.command = "exec sed -u 's/^{\"i\":\\([0-9]*\\),\"pad\":\"\\(x*\\)\"}$/\\2\\1/; s/x/ /g'",
                   .timeout_seconds = 60});
  const auto r = p.exchange(big);
  BOOST_TEST_REQUIRE(r.size() == big.size());
  for (std::size_t i = 0; i < r.size(); ++i) BOOST_TEST_REQUIRE(r[i] == double(i));
  BOOST_TEST(p.finish());
}

BOOST_AUTO_TEST_CASE(answers_may_be_any_json_number) {
  ScorerProcess p({.command = "read a; read b; read c; printf '1\\n-2.5e-1\\r\\n  3 \\n'; cat > /dev/null"});
  BOOST_TEST(p.exchange(lines(3)) == (std::vector<double>{1, -0.25, 3}), boost::test_tools::per_element());
  BOOST_TEST(p.finish());
}

BOOST_AUTO_TEST_CASE(python_scorers_are_unbuffered) {
  ScorerProcess p({.command = "while read l; do echo \"${PYTHONUNBUFFERED:-0}\"; done"});
  BOOST_TEST(p.exchange(lines(1)) == (std::vector<double>{1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_scorer_that_dies_or_answers_too_few_lines) {
  std::string e = failure("read l; echo 1; exit 3");
  BOOST_TEST(has(e, "--reward-cmd: 'read l; echo 1; exit 3' ended its output after 1 of 3 rewards (exit code 3)"), e);
  e = failure("read l; kill -9 $$");
  BOOST_TEST(has(e, "after 0 of 3 rewards (killed by signal 9)"), e);
  e = failure("head -n 1 > /dev/null; echo 0.5; echo 0.5");  // two answers for three lines, then a clean exit
  BOOST_TEST(has(e, "ended its output after 2 of 3 rewards (exit code 0)"), e);
  e = failure("nonexistent-scorer-command");
  BOOST_TEST(has(e, "'nonexistent-scorer-command' ended its output after 0 of 3 rewards (exit code 127)"), e);
  e = failure("read l; printf '1\\n2'");  // an unfinished last line
  BOOST_TEST(has(e, "its last, unfinished line was \"2\""), e);
}

BOOST_AUTO_TEST_CASE(a_scorer_that_answers_garbage) {
  std::string e = failure("while read l; do echo ok; done");
  BOOST_TEST(has(e, "answered line 1 of 3 with \"ok\", expected a number"), e);
  e = failure("while read l; do echo '{\"reward\": 1}'; done");
  BOOST_TEST(has(e, "expected a number"), e);
  e = failure("while read l; do echo; done");
  BOOST_TEST(has(e, "answered line 1 of 3 with \"\""), e);
  e = failure("read l; echo 1; read l; echo nan; cat >/dev/null");
  BOOST_TEST(has(e, "answered line 2 of 3 with \"nan\", which is not a finite number"), e);
  e = failure("while read l; do echo 1e999; done");
  BOOST_TEST(has(e, "which is not a finite number"), e);
  e = failure("while read l; do echo 1e300; done");  // finite, but no float32
  BOOST_TEST(has(e, "which is not a finite number (as a float32 reward)"), e);
}

BOOST_AUTO_TEST_CASE(a_scorer_that_answers_too_many_lines) {
  // Both answers arrive with the first: the extra one is seen at once, or at the end.
  const std::string e = failure("while read l; do echo 1; echo 2; done", 1);
  BOOST_TEST(has(e, "more"), e);
  ScorerProcess p({.command = "read l; echo 1; sleep 0.2; echo 2"});
  BOOST_TEST(p.exchange(lines(1)).size() == 1u);
  try {
    p.finish();
    BOOST_ERROR("an answer after the last line was accepted");
  } catch (const InputError& err) {
    BOOST_TEST(has(err.what(), "wrote \"2\\n\" after its last answer"), err.what());
  }
}

BOOST_AUTO_TEST_CASE(a_silent_scorer_times_out) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = failure("sleep 30", 2, 0.5);
  BOOST_TEST(has(e, "gave no answer for 0.5 s (0 of 2 rewards so far"), e);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
}

// A scorer that timed out was stopped, but only /bin/sh got the signal: what the command
// started kept running, holding the pipes (a caller reading our output waited for it).
// Its whole process group is ended now and nothing of it is left.
BOOST_AUTO_TEST_CASE(a_timed_out_scorer_is_ended_with_what_it_started) {
  const auto pid_file = test::scratch("scorer-child.pid");
  std::filesystem::remove(pid_file);
  const std::string e = failure("sleep 30 & echo $! > '" + pid_file.string() + "'; wait", 2, 0.5);
  BOOST_TEST(has(e, "gave no answer for 0.5 s"), e);
  std::ifstream in(pid_file);
  pid_t child = 0;
  BOOST_REQUIRE(in >> child);
  // Ended and reaped (by init, its parent once the shell is gone): no such process, or a
  // zombie for the moment it takes init to reap it.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid_text, name, state;
    gone = !(stat >> pid_text >> name >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(gone, "the scorer's child " << child << " is still running");
}

BOOST_AUTO_TEST_CASE(a_scorer_that_fails_at_the_end_is_a_warning) {
  ScorerProcess p({.command = "read l; echo 1; exit 4"});
  BOOST_TEST(p.exchange(lines(1)).size() == 1u);
  BOOST_TEST(!p.finish());
}

BOOST_AUTO_TEST_CASE(a_scorer_in_a_missing_folder_cannot_start) {
  const std::string dir = (test::scratch("nowhere") / "missing").string();
  ScorerProcess p({.command = "cat", .dir = dir});
  try {
    p.exchange(lines(1));
    BOOST_ERROR("started in a missing folder");
  } catch (const InputError& e) {
    BOOST_TEST(has(e.what(), "'cat' cannot be started in " + dir), e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_line_holds_prompt_response_id_and_extra_fields) {
  TextSample s{.sample_id = 7, .prompt = "1+1=", .response = "2\xff", .extra = {{"answer", 2}, {"level", "easy"}},
               .has_origin = true, .where = "p.jsonl:3"};
  const json line = json::parse(scorer_line(s));
  BOOST_TEST(line["prompt"] == "1+1=");
  BOOST_TEST(line["response"] == "2\xef\xbf\xbd");  // a byte that is no UTF-8 becomes U+FFFD
  BOOST_TEST(line["sample_id"] == 7);
  BOOST_TEST(line["answer"] == 2);
  BOOST_TEST(line["level"] == "easy");
  BOOST_TEST(scorer_line(s).find('\n') == std::string::npos);

  s.extra["response"] = "mine";
  try {
    scorer_line(s);
    BOOST_ERROR("a clashing field was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(e.file() == "p.jsonl:3");
    BOOST_TEST(e.field() == "response");
  }

  // Through the TextReward: the scorer sees each sample's line and answers from it.
  s.extra.erase("response");
  const std::string command = "while read l; do a=${l#*\\\"answer\\\":}; echo ${a%%[,\\}]*}; done";
  auto reward = make_command_reward({.command = command});
  std::vector<TextSample> batch{s, s};
  batch[1].extra["answer"] = 5;
  BOOST_TEST(reward->score(batch) == (std::vector<double>{2, 5}), boost::test_tools::per_element());
  BOOST_TEST(reward->config() == (json{{"command", command}}));
  reward->finish();
}
