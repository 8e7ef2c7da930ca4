// Child processes and steps: pipes between processes, the failing process named
// with its exit code, and a step due exactly when make would run it.
#define BOOST_TEST_MODULE driver_spawn
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <string>

#include "core/files.hpp"
#include "driver/run_loop.hpp"
#include "driver/spawn.hpp"
#include "tests/driver/run_files.hpp"

using namespace braid;
using namespace braid::driver;
namespace fs = std::filesystem;

namespace {

Process sh(const std::string& stage, const std::string& script) { return {stage, {"sh", "-c", script}}; }

// Sets a file's time a given number of seconds after the epoch-relative base.
void set_age(const fs::path& p, int seconds) {
  fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(1) + std::chrono::seconds(seconds));
}

}  // namespace

BOOST_AUTO_TEST_CASE(stdout_feeds_the_next_process) {
  const fs::path out = test::scratch("piped.txt");
  fs::remove(out);
  // The second process sees the first one's lines; argv reaches it unparsed (spaces, quotes).
  const auto failure = run_pipeline({sh("first", "printf 'a b\\nc\\n'"),
                                     {"second", {"sh", "-c", "tr a-z A-Z > \"$1\"", "sh", out.string()}}});
  BOOST_TEST(!failure.has_value());
  BOOST_TEST(read_text_file(out.string()) == "A B\nC\n");
}

BOOST_AUTO_TEST_CASE(the_failing_process_is_named) {
  const auto failure = run_pipeline({sh("generate", "exit 0"), sh("score", "cat >/dev/null; exit 2")});
  BOOST_REQUIRE(failure.has_value());
  BOOST_TEST(failure->stage == "score");
  BOOST_TEST(failure->exit_code == 2);
  BOOST_TEST(failure->command == "sh -c 'cat >/dev/null; exit 2'");
  BOOST_TEST(failure->describe() == "exit code 2");
}

BOOST_AUTO_TEST_CASE(the_first_to_fail_is_blamed_and_the_rest_stopped) {
  // generate fails at once; score would wait a minute, but is stopped by SIGTERM.
  const auto start = std::chrono::steady_clock::now();
  const auto failure = run_pipeline({sh("generate", "exit 3"), sh("score", "exec sleep 60")});
  BOOST_REQUIRE(failure.has_value());
  BOOST_TEST(failure->stage == "generate");
  BOOST_TEST(failure->exit_code == 3);
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(pipelines_run_at_once_each_piped_in_itself) {
  // Each of the two pipelines waits for a file only the other one writes: they finish only
  // when both run at the same time (async braid run: training beside the next rollout).
  const fs::path dir = test::fresh_scratch("concurrent");
  const std::string a = (dir / "a").string(), b = (dir / "b").string();
  auto waits_for = [](const std::string& mine, const std::string& theirs) {
    return "touch " + mine + "; i=0; while [ ! -e " + theirs + " ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
           "[ -e " + theirs + " ] && echo " + mine;
  };
  const fs::path out_a = dir / "out-a", out_b = dir / "out-b";
  const auto failure = run_pipelines(
      {{sh("train", waits_for(a, b)), {"record", {"sh", "-c", "cat > \"$1\"", "sh", out_a.string()}}},
       {sh("generate", waits_for(b, a)), {"score", {"sh", "-c", "cat > \"$1\"", "sh", out_b.string()}}}});
  BOOST_TEST(!failure.has_value());
  // Each pipeline's output went to its own next process, not the other pipeline's.
  BOOST_TEST(read_text_file(out_a.string()) == a + "\n");
  BOOST_TEST(read_text_file(out_b.string()) == b + "\n");
}

BOOST_AUTO_TEST_CASE(a_failing_pipeline_stops_the_other) {
  const auto start = std::chrono::steady_clock::now();
  const auto failure = run_pipelines({{sh("train", "exit 4")}, {sh("generate", "exec sleep 60"), sh("score", "cat")}});
  BOOST_REQUIRE(failure.has_value());
  BOOST_TEST(failure->stage == "train");
  BOOST_TEST(failure->exit_code == 4);
  BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(30)));
}

BOOST_AUTO_TEST_CASE(a_missing_program_fails_with_127) {
  const auto failure = run_pipeline({{"train", {"braid-no-such-tool-here", "--help"}}});
  BOOST_REQUIRE(failure.has_value());
  BOOST_TEST(failure->stage == "train");
  BOOST_TEST(failure->exit_code == 127);
}

BOOST_AUTO_TEST_CASE(a_failed_step_names_step_stage_and_command) {
  const Step step{.name = "iteration 2 train", .pipeline = {Command{.stage = "train", .argv = {"sh", "-c", "exit 2"}}},
                  .inputs = {}, .outputs = {test::scratch("never.h5")}, .stale = {}};
  try {
    execute_step(step);
    BOOST_FAIL("the step did not fail");
  } catch (const StageFailed& e) {
    BOOST_TEST(e.exit_code() == 2);
    BOOST_TEST(std::string(e.what()) == "iteration 2 train: train failed with exit code 2: sh -c 'exit 2'");
  }
}

BOOST_AUTO_TEST_CASE(a_step_is_due_like_a_make_rule) {
  const fs::path dir = test::fresh_scratch("due");
  const fs::path in = dir / "in.h5", out = dir / "out.h5", log = dir / "log.txt";
  test::write_file(in, "x");
  Step step{.name = "copy", .pipeline = {Command{.stage = "copy", .argv = {"sh", "-c", "cp \"$1\" \"$2\"; echo ran >> \"$3\"", "sh", in.string(), out.string(), log.string()}}},
            .inputs = {in}, .outputs = {out}, .stale = {out}};
  BOOST_TEST(step_due(step));  // output missing
  execute_step(step);
  BOOST_TEST(!step_due(step));
  // An input newer than the output: due again.
  set_age(out, 0);
  set_age(in, 10);
  BOOST_TEST(step_due(step));
  // Stage files stand for a checkpoint.
  fs::remove(out);
  test::write_file(dir / "out.stage0-of-2.h5", "x");
  BOOST_TEST(step_due(step));
  test::write_file(dir / "out.stage1-of-2.h5", "x");
  BOOST_TEST(!step_due(step));
  BOOST_TEST(read_text_file(log.string()) == "ran\n");
}

namespace {
volatile sig_atomic_t g_driver_got = 0;
extern "C" void driver_handler(int sig) { g_driver_got = sig; }
}  // namespace

BOOST_AUTO_TEST_CASE(a_signal_to_the_driver_reaches_its_children) {
  // The driver's own handler (braid's: remove temp files, then die) stands in as a recorder.
  struct sigaction sa {}, old {};
  sa.sa_handler = driver_handler;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old);
  // The child asks for its parent's end (kill PID: the driver alone, not a process group),
  // and would then sleep long if the driver did not pass the signal on.
  const auto failure = run_pipeline({sh("generate", "sleep 0.2; kill -TERM $PPID; exec sleep 30")});
  ::sigaction(SIGTERM, &old, nullptr);
  BOOST_REQUIRE(failure.has_value());
  BOOST_TEST(failure->signal == SIGTERM);
  // ... and once the children are gone, the driver's own handler gets the signal.
  BOOST_TEST(g_driver_got == SIGTERM);
}
