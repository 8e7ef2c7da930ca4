// AtomicFile: a file appears under its final name only when complete, an
// abandoned one leaves nothing, and SIGTERM cleans up the temporary.
#define BOOST_TEST_MODULE atomic_file
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/error.hpp"
#include "core/files.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;

namespace {

using braid::test::scratch;

std::size_t temps_in(const fs::path& dir, const std::string& final_name) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    n += e.path().filename().string().rfind("." + final_name + ".tmp-", 0) == 0;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(commit_renames_a_complete_file_onto_the_final_name) {
  const auto path = scratch("out.txt");
  write_text_file(path.string(), "old");
  AtomicFile f(path);
  BOOST_TEST(f.temp_path().parent_path() == path.parent_path());
  BOOST_TEST(f.temp_path().filename().string().rfind(".out.txt.tmp-", 0) == 0u);
  std::ofstream(f.temp_path()) << "new";
  BOOST_TEST(read_text_file(path.string()) == "old");  // the reader still sees the old file
  f.commit();
  BOOST_TEST(read_text_file(path.string()) == "new");
  BOOST_TEST(!fs::exists(f.temp_path()));
  BOOST_CHECK_THROW(f.commit(), std::logic_error);
}

BOOST_AUTO_TEST_CASE(an_abandoned_file_leaves_nothing) {
  const auto path = scratch("abandoned.txt");
  fs::remove(path);
  try {
    AtomicFile f(path);
    std::ofstream(f.temp_path()) << "half";
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(temps_in(path.parent_path(), "abandoned.txt") == 0u);
}

// The temp file exists from the constructor on, made exclusively (a file or link already at
// its name is never written through) under a name whose last part is random: another process
// cannot plant a link where a writer will write.
BOOST_AUTO_TEST_CASE(the_temp_file_is_made_exclusively_under_an_unguessable_name) {
  const auto path = scratch("excl.txt");
  AtomicFile a(path), b(path);
  for (const AtomicFile* f : {&a, &b}) {
    BOOST_TEST(fs::is_regular_file(fs::symlink_status(f->temp_path())));
    BOOST_TEST(fs::file_size(f->temp_path()) == 0u);
  }
  BOOST_TEST(a.temp_path() != b.temp_path());
  const std::string prefix = ".excl.txt.tmp-" + std::to_string(getpid()) + "-";
  BOOST_TEST(a.temp_path().filename().string().rfind(prefix, 0) == 0u);
  // Not a counter: the two suffixes are far apart (equal odds of any 64-bit value).
  const auto suffix = [&](const AtomicFile& f) { return std::stoull(f.temp_path().filename().string().substr(prefix.size())); };
  BOOST_TEST((suffix(a) > suffix(b) ? suffix(a) - suffix(b) : suffix(b) - suffix(a)) > 1000u);
  // Committing the empty file makes an empty file.
  a.commit();
  BOOST_TEST(fs::is_regular_file(path));
  BOOST_TEST(fs::file_size(path) == 0u);
}

// A training step's files appear together or not at all.
BOOST_AUTO_TEST_CASE(a_commit_group_renames_all_or_none) {
  const auto x = scratch("group-x.txt"), y = scratch("group-y.txt");
  fs::remove(x);
  fs::remove(y);
  {
    CommitGroup group;
    write_text_file(x.string(), "x");
    BOOST_TEST(!fs::exists(x));  // finished, not yet renamed
    try {
      AtomicFile f(y);
      write_all(f, "y");
      throw InputError(y.string(), "", "diverged");
    } catch (const InputError&) {
    }
  }  // destroyed uncommitted: x's finished temp goes too
  BOOST_TEST(!fs::exists(x));
  BOOST_TEST(temps_in(x.parent_path(), "group-x.txt") == 0u);
  {
    CommitGroup group;
    write_text_file(x.string(), "x");
    write_text_file(y.string(), "y");
    BOOST_TEST(!fs::exists(x));
    group.commit();
  }
  BOOST_TEST(read_text_file(x.string()) == "x");
  BOOST_TEST(read_text_file(y.string()) == "y");
  write_text_file(x.string(), "after");  // no group: renamed at once
  BOOST_TEST(read_text_file(x.string()) == "after");
}

// braid export's folder: nothing under the final name until commit, then every file.
BOOST_AUTO_TEST_CASE(an_atomic_folder_appears_whole_or_not_at_all) {
  const auto dir = scratch("folder-out");
  fs::remove_all(dir);
  try {
    AtomicFolder f(dir / "");  // "folder-out/" names the folder
    write_text_file((f.temp_path() / "a.json").string(), "{}");
    BOOST_TEST(!fs::exists(dir));
    throw std::runtime_error("export failed");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(!fs::exists(dir));
  BOOST_TEST(temps_in(dir.parent_path(), "folder-out") == 0u);
  for (int round = 0; round < 2; ++round) {  // into a new folder, then into the existing one
    AtomicFolder f(dir);
    const auto a = f.temp_path() / "a.json";
    write_text_file(a.string(), std::to_string(round));
    BOOST_TEST(f.final_of(a) == dir / "a.json");
    f.commit();
    BOOST_TEST(read_text_file((dir / "a.json").string()) == std::to_string(round));
    BOOST_TEST(temps_in(dir.parent_path(), "folder-out") == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_missing_folder_is_an_input_error_naming_the_file) {
  try {
    AtomicFile f(scratch("no-such-dir/x.txt"));
    BOOST_FAIL("no error");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("no-such-dir/x.txt") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(sigterm_removes_the_temporary) {
  const auto path = scratch("signalled.txt");
  fs::remove(path);
  int ready[2];
  BOOST_REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    install_temp_cleanup_on_signals();
    AtomicFile f(path);
    std::ofstream(f.temp_path()) << "partial";
    const char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  BOOST_REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  BOOST_TEST(temps_in(path.parent_path(), "signalled.txt") == 1u);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGTERM);
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(temps_in(path.parent_path(), "signalled.txt") == 0u);
}

namespace {
// Caps the size of files this process writes (RLIMIT_FSIZE) and ignores the
// SIGXFSZ that exceeding it sends, so a write past the cap fails with EFBIG the
// way a full disk fails with ENOSPC. Restores both when destroyed.
struct FileSizeCap {
  rlimit old{};
  struct sigaction old_action{};
  explicit FileSizeCap(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old);
    struct sigaction ign{};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ign, &old_action);
    rlimit cap = old;
    cap.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &cap);
  }
  ~FileSizeCap() {
    setrlimit(RLIMIT_FSIZE, &old);
    sigaction(SIGXFSZ, &old_action, nullptr);
  }
};

// The PID of a process that has ended (and been reaped).
pid_t a_dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_write_that_fails_names_the_file_and_the_reason_and_leaves_nothing) {
  const auto path = scratch("big.json");
  fs::remove(path);
  const std::string text(64 * 1024, 'x');
  try {
    FileSizeCap cap(4096);
    write_text_file(path.string(), text);
    BOOST_FAIL("a write past the file size limit succeeded");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find(path.string()) != std::string::npos, what);
    BOOST_TEST(what.find("File too large") != std::string::npos, what);
  }
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(temps_in(path.parent_path(), "big.json") == 0u);
}

BOOST_AUTO_TEST_CASE(temps_left_by_a_dead_writer_are_removed_by_the_next_one) {
  const auto path = scratch("killed.h5");
  const auto dir = path.parent_path();
  const pid_t dead = a_dead_pid();
  const fs::path stale = dir / (".killed.h5.tmp-" + std::to_string(dead) + "-0");
  const fs::path live = dir / (".killed.h5.tmp-" + std::to_string(getppid()) + "-3");  // a running process
  const fs::path other = dir / (".killed.h5.tmp-" + std::to_string(dead) + "-0x");       // not braid's pattern
  const fs::path other_output = dir / (".other.h5.tmp-" + std::to_string(dead) + "-0");  // another output's temp
  for (const auto& p : {stale, live, other, other_output}) std::ofstream(p) << "partial";
  write_text_file(path.string(), "done");
  BOOST_TEST(!fs::exists(stale));
  BOOST_TEST(fs::exists(live));
  BOOST_TEST(fs::exists(other));
  BOOST_TEST(fs::exists(other_output));
  BOOST_TEST(fs::exists(path));
  for (const auto& p : {live, other, other_output}) fs::remove(p);
}
