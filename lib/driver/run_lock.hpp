// One writer per run folder. A `braid run`, or one `make` of a braid Makefile, holds
// OUT for as long as it works there; a second driver on the same folder exits 2 at once,
// naming the holder's pid and host, instead of training the same iterations beside it.
//
// Two files say who holds OUT:
// * OUT/.braid-run.lock, locked with flock for as long as something writes: exclusively by
//   braid run, shared by each Makefile recipe's shell (and so by the tools it starts, which
//   inherit it: a recipe's tool left running after its make was killed still holds it).
//   The kernel drops a flock however its holder ends.
// * OUT/.braid-run.owner, one line naming the driver that holds the folder: its pid, its
//   host, its process start time (so that a reused pid is not mistaken for it) and what
//   it is ("braid run", "make"). Recipes of one make share it (the make is their parent),
//   and a braid run started by that make's recipes (the Makefile's last rule) works under
//   it. An owner that has ended is stale: the next driver takes the folder over (logged).
//   An owner on another host cannot be checked, so it is refused until its line is removed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace braid::driver {

struct RunOwner {
  pid_t pid = 0;
  std::string host;
  std::uint64_t start = 0;   // the process's start time in clock ticks after boot (/proc/PID/stat); 0: unknown
  std::string what;          // "braid run", "make"
};

// The owner of process `pid` as recorded: this host, its start time.
RunOwner owner_of(pid_t pid, const std::string& what);

// braid run's hold on OUT (created if missing) for this object's life: InputError (exit 2)
// naming the holder when another driver holds the folder or a tool still writes in it;
// a stale owner is taken over. The owner line is removed when the object goes, if it is
// this process's.
class RunLock {
 public:
  RunLock(const std::filesystem::path& out, const std::string& what);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  std::filesystem::path owner_file_;
  int fd_ = -1;
  bool owns_ = false;
};

// A Makefile recipe's claim on OUT for `owner` (its make): a shared flock on `fd` (the
// recipe shell's descriptor of OUT/.braid-run.lock, which its tools inherit, so the lock
// lasts as long as they run) and the owner line. InputError naming the holder as RunLock.
void claim_for_recipe(const std::filesystem::path& out, const RunOwner& owner, int fd);

// The lock file a Makefile's recipes open (OUT/.braid-run.lock).
std::filesystem::path run_lock_file(const std::filesystem::path& out);

}  // namespace braid::driver
