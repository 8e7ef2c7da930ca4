// A writer killed in the middle of writing leaves nothing under the final name:
// the child processes here are stopped at a known point inside a write (by a
// pipe handshake, or by the kernel's file-size limit), never by timing.
#define BOOST_TEST_MODULE atomic_write
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/files.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::io;
using braid::test::scratch;

namespace {

// Files in dir whose name starts with "." + final name + ".tmp": the writer's temporaries.
std::vector<fs::path> temps_of(const fs::path& final_path) {
  std::vector<fs::path> out;
  const std::string prefix = "." + final_path.filename().string() + ".tmp";
  for (const auto& e : fs::directory_iterator(final_path.parent_path())) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  return out;
}

void clean(const fs::path& final_path) {
  fs::remove(final_path);
  for (const auto& t : temps_of(final_path)) fs::remove(t);
}

// Runs body in a child; returns the signal that ended it (0 if it exited).
int run_child(const std::function<void()>& body, const std::function<void(pid_t)>& parent) {
  const pid_t pid = fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  parent(pid);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// A child that writes half a weight shard, tells the parent, and waits forever.
int kill_weight_writer_midway(const fs::path& path, int sig) {
  int ready[2];
  BOOST_REQUIRE(pipe(ready) == 0);
  const int ended = run_child(
      [&] {
        close(ready[0]);
        install_temp_cleanup_on_signals();
        WeightShardWriter w(path, WeightShardMeta{});
        std::vector<float> big(1 << 20, 1.0f);
        w.add("model.layers.0.mlp.up_proj.weight", {1024, 1024}, big);
        const char c = 'x';
        if (write(ready[1], &c, 1) != 1) _exit(4);
        for (;;) pause();
      },
      [&](pid_t pid) {
        close(ready[1]);
        char c = 0;
        BOOST_REQUIRE(read(ready[0], &c, 1) == 1);
        close(ready[0]);
        kill(pid, sig);
      });
  return ended;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sigkill_mid_write_leaves_no_final_file) {
  const auto path = scratch("killed.h5");
  clean(path);
  BOOST_TEST(kill_weight_writer_midway(path, SIGKILL) == SIGKILL);
  BOOST_TEST(!fs::exists(path));
  // Nothing could clean up after SIGKILL: the temporary is there, under another name.
  BOOST_TEST(temps_of(path).size() == 1u);
  clean(path);
}

BOOST_AUTO_TEST_CASE(sigterm_mid_write_leaves_neither_final_nor_temp_file) {
  const auto path = scratch("terminated.h5");
  clean(path);
  BOOST_TEST(kill_weight_writer_midway(path, SIGTERM) == SIGTERM);
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(temps_of(path).empty());
}

BOOST_AUTO_TEST_CASE(sample_writer_stopped_by_the_file_size_limit_leaves_no_final_file) {
  const auto path = scratch("too_big.h5");
  clean(path);
  // An old shard under the final name must survive a failed rewrite untouched.
  SampleBatch small;
  small.add(std::vector<std::int32_t>{1, 2, 3}, 1, 0);
  write_sample_shard(path, small, {});
  const auto old_size = fs::file_size(path);

  const int sig = run_child(
      [&] {
        SampleBatch big;
        std::vector<std::int32_t> seq(1 << 16);
        for (std::size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<std::int32_t>((i * 2654435761u) % 50000);
        for (int i = 0; i < 64; ++i) big.add(seq, 10, i);  // 16 MiB of tokens, hardly compressible
        rlimit lim{256 * 1024, 256 * 1024};
        setrlimit(RLIMIT_FSIZE, &lim);
        write_sample_shard(path, big, {});
      },
      [](pid_t) {});
  BOOST_TEST(sig == SIGXFSZ);
  BOOST_TEST(fs::file_size(path) == old_size);
  BOOST_TEST(read_sample_shard(path).batch.tokens == small.tokens, boost::test_tools::per_element());
  clean(path);
}
