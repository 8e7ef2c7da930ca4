// What read_text_file takes and refuses by a path's type, and the one-path-per-line form
// the tools print their files in and read them back from.
#define BOOST_TEST_MODULE read_file
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/files.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;

namespace {

std::string refusal(const std::string& path) {
  try {
    read_text_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(devices_are_refused_by_their_type) {
  for (const char* dev : {"/dev/zero", "/dev/urandom"}) {
    const std::string e = refusal(dev);
    BOOST_TEST(e.find(std::string(dev) + ": is a character device") == 0u, e);
    BOOST_CHECK_THROW(require_regular_file(dev), InputError);
  }
  BOOST_TEST(refusal("/").find("is a folder") != std::string::npos);
  BOOST_TEST(refusal(test::scratch("no-such-file").string()).find("no such file") != std::string::npos);
}

// Opening a FIFO nobody writes to blocked forever; now the read gives up after
// BRAID_READ_TIMEOUT seconds without a byte.
BOOST_AUTO_TEST_CASE(a_fifo_without_a_writer_times_out) {
  ::setenv("BRAID_READ_TIMEOUT", "0.5", 1);
  const auto fifo = test::scratch("fifo");
  fs::remove(fifo);
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = refusal(fifo.string());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(e.find("no data came for 0.5 s") != std::string::npos, e);
  BOOST_TEST(took < 5.0);
  BOOST_CHECK_THROW(require_regular_file(fifo.string()), InputError);
  fs::remove(fifo);
}

BOOST_AUTO_TEST_CASE(paths_with_newlines_round_trip_through_a_line) {
  for (const std::string p : {"out/gen-00000.h5", "out\nline/gen-00000.h5", "a\rb", "\"quoted\".h5", "tab\there", ""}) {
    const std::string line = path_line(p);
    BOOST_TEST(line.find('\n') == std::string::npos);
    BOOST_TEST(line.find('\r') == std::string::npos);
    BOOST_TEST(path_from_line(line, "<stdin>") == p);
  }
  BOOST_TEST(path_line("plain/path.h5") == "plain/path.h5");  // every ordinary path as it is
  BOOST_TEST(path_line("out\nline") == "\"out\\nline\"");
  BOOST_CHECK_THROW(path_from_line("\"unterminated", "<stdin>"), InputError);
}
