// Progress lines and the rate/duration formats they use.
#define BOOST_TEST_MODULE progress
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/log.hpp"
#include "core/progress.hpp"

using namespace braid;

namespace {

// Runs body with stderr redirected to an anonymous temporary file; returns what it wrote.
template <typename F>
std::string capture_stderr(F body) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  BOOST_REQUIRE(tmp != nullptr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  body();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  std::rewind(tmp);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rates_use_si_prefixes) {
  BOOST_TEST(format_rate(12.0, "tok") == "12 tok/s");
  BOOST_TEST(format_rate(1234.0, "tok") == "1.23 ktok/s");
  BOOST_TEST(format_rate(2.5e6, "it") == "2.5 Mit/s");
  BOOST_TEST(format_rate(3e9, "") == "3 G/s");
}

BOOST_AUTO_TEST_CASE(durations_are_short_and_readable) {
  BOOST_TEST(format_duration(5.5) == "5.50s");
  BOOST_TEST(format_duration(42.4) == "42s");
  BOOST_TEST(format_duration(65) == "1m05s");
  BOOST_TEST(format_duration(3700) == "1h01m");
  BOOST_TEST(format_duration(std::nan("")) == "?");
  BOOST_TEST(format_duration(-1) == "?");
}

BOOST_AUTO_TEST_CASE(plain_mode_prints_one_final_line) {
  log::set_tool_name("braid-test");
  log::set_level(log::Level::info);
  Progress::force_terminal(0);
  const std::string out = capture_stderr([] {
    Progress p("loading", 10, "it", 1e9);
    for (int i = 0; i < 10; ++i) p.advance();
    p.set_status("best 3.5");
    p.finish();
  });
  BOOST_TEST(out.rfind("braid-test: loading 10/10 it in ", 0) == 0u);
  BOOST_TEST(out.find("it/s)") != std::string::npos);
  BOOST_TEST(out.find(", best 3.5\n") != std::string::npos);
  BOOST_TEST(std::count(out.begin(), out.end(), '\n') == 1);
}

BOOST_AUTO_TEST_CASE(terminal_mode_redraws_in_place_with_a_bar) {
  log::set_level(log::Level::info);
  Progress::force_terminal(1);
  const std::string out = capture_stderr([] {
    Progress p("annealing", 4, "it");
    usleep(120000);  // past the 0.1 s redraw interval, so the next advance draws
    p.advance(2);
    p.finish();
  });
  BOOST_TEST(out.find("\rbraid-test: annealing [############............] 2/4 it") != std::string::npos);
  BOOST_TEST(out.find("ETA") != std::string::npos);
  Progress::force_terminal(-1);
}

BOOST_AUTO_TEST_CASE(quiet_mode_prints_nothing) {
  log::set_level(log::Level::quiet);
  Progress::force_terminal(0);
  const std::string out = capture_stderr([] {
    Progress p("silent", 3);
    p.advance(3);
    p.finish();
  });
  BOOST_TEST(out.empty());
  log::set_level(log::Level::info);
}
