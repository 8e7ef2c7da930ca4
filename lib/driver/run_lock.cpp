#include "driver/run_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Fields 4 (ppid) and 22 (start time) of /proc/PID/stat; nullopt when the process is gone.
struct ProcStat {
  pid_t ppid = 0;
  std::uint64_t start = 0;
};
std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const auto paren = text.rfind(')');   // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  if (f.size() < 20) return std::nullopt;
  // f[0] is field 3 (state): field k is f[k - 3].
  return ProcStat{static_cast<pid_t>(std::stol(f[1])), std::stoull(f[19])};
}

bool same_process(const RunOwner& o, pid_t pid, std::uint64_t start) {
  return o.pid == pid && (o.start == 0 || start == 0 || o.start == start);
}

bool alive(const RunOwner& o) {
  if (o.pid <= 0 || (::kill(o.pid, 0) != 0 && errno != EPERM)) return false;
  const auto st = proc_stat(o.pid);
  return st && same_process(o, o.pid, st->start);
}

// Whether `o` is a parent, grandparent, ... of this process (the make whose recipe started it).
bool is_ancestor(const RunOwner& o) {
  pid_t pid = ::getppid();
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    const auto st = proc_stat(pid);
    if (!st) return false;
    if (same_process(o, pid, st->start)) return true;
    pid = st->ppid;
  }
  return false;
}

std::string describe(const RunOwner& o) {
  return fmt::format("{} (pid {} on host {})", o.what.empty() ? "a braid run" : o.what, o.pid, o.host);
}

// One of the folder's lock files, opened (created when missing; a link is not followed).
// A read-only folder, or a folder where the file goes, is the user's to fix: InputError.
int open_lock_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InputError(path.string(), "", fmt::format("cannot open the run folder's lock file: {}{}", std::strerror(errno),
                                                    errno == EISDIR ? " (it is a folder: remove it)" : ""));
  }
  return fd;
}

// The owner line's file, opened and locked exclusively while it is read and rewritten
// (briefly: the holders of the folder lock it only to look).
class OwnerFile {
 public:
  explicit OwnerFile(const fs::path& path) : path_(path) {
    fd_ = open_lock_file(path);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw InputError(path.string(), "", fmt::format("cannot lock: {}", std::strerror(errno)));
    }
  }
  ~OwnerFile() { ::close(fd_); }
  OwnerFile(const OwnerFile&) = delete;
  OwnerFile& operator=(const OwnerFile&) = delete;

  std::optional<RunOwner> read() const {
    char buf[1024] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    if (n <= 0) return std::nullopt;
    std::istringstream in(std::string(buf, static_cast<std::size_t>(n)));
    RunOwner o;
    long long pid = 0;
    if (!(in >> pid >> o.host >> o.start)) return std::nullopt;   // not a line braid wrote: no owner
    o.pid = static_cast<pid_t>(pid);
    std::getline(in >> std::ws, o.what);
    return o;
  }
  void write(const RunOwner& o) const {
    const std::string line = fmt::format("{} {} {} {}\n", o.pid, o.host, o.start, o.what);
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
      throw InputError(path_.string(), "", fmt::format("cannot write: {}", std::strerror(errno)));
    }
  }
  void clear() const { (void)::ftruncate(fd_, 0); }

 private:
  fs::path path_;
  int fd_ = -1;
};

fs::path owner_path(const fs::path& out) { return out / ".braid-run.owner"; }

// The processes /proc/locks says hold a flock on the file behind fd.
std::vector<pid_t> flock_holders(int fd) {
  struct stat st {};
  std::vector<pid_t> pids;
  if (::fstat(fd, &st) != 0) return pids;
  const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
  std::ifstream in("/proc/locks");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string n, type, advisory, mode, dev;
    long long pid = 0;
    if (words >> n >> type) {
      if (type == "->") words >> type;   // a waiter's line
      if (words >> advisory >> mode >> pid >> dev && type == "FLOCK" && dev == id && pid > 0) {
        pids.push_back(static_cast<pid_t>(pid));
      }
    }
  }
  return pids;
}

[[noreturn]] void refuse(const fs::path& out, const std::string& holder) {
  // InputError (exit 2): the command line is right, the folder is busy.
  throw InputError(out.string(), "",
                   fmt::format("{} is working in this run folder; a second run in it would train the same iterations "
                               "beside the first (wait for it to end, or use another output folder)",
                               holder));
}

// Who keeps the folder lock (fd) from being taken: the owner line's driver when it runs,
// else the processes the kernel lists.
std::string holder_of_lock(const fs::path& out, int fd) {
  const auto owner = OwnerFile(owner_path(out)).read();
  if (owner && owner->host == this_host() && alive(*owner)) return describe(*owner);
  std::string who = "a process";
  if (const auto pids = flock_holders(fd); !pids.empty()) {
    who = fmt::format("pid {} on host {}", fmt::join(pids, ", "), this_host());
  }
  return fmt::format("{} (it holds {}{})", who, run_lock_file(out).string(),
                     owner ? fmt::format("; the run's driver, {}, has ended", describe(*owner)) : "");
}

enum class Settled { taken, inherited };

// The owner line for `me`: written when the folder is free (no line, or a stale one);
// left as it is when it names `me` or a driver that started this process. InputError
// naming the owner when another driver that runs holds it, or one on another host.
Settled settle_owner(const fs::path& out, const RunOwner& me) {
  const OwnerFile f(owner_path(out));
  if (const auto cur = f.read()) {
    if (cur->host != me.host) {
      throw InputError(out.string(), "",
                       fmt::format("{} holds this run folder; braid cannot tell from host {} whether it still runs "
                                   "(remove {} once it has ended)",
                                   describe(*cur), me.host, owner_path(out).string()));
    }
    if (same_process(*cur, me.pid, me.start)) return Settled::taken;
    if (alive(*cur)) {
      if (is_ancestor(*cur)) return Settled::inherited;
      refuse(out, describe(*cur));
    }
    log::info("{}: the run folder's last holder, {}, has ended: {} takes it over", out.string(), describe(*cur), me.what);
  }
  f.write(me);
  return Settled::taken;
}

}  // namespace

fs::path run_lock_file(const fs::path& out) { return out / ".braid-run.lock"; }

RunOwner owner_of(pid_t pid, const std::string& what) {
  const auto st = proc_stat(pid);
  return RunOwner{pid, this_host(), st ? st->start : 0, what};
}

RunLock::RunLock(const fs::path& out, const std::string& what) : owner_file_(owner_path(out)) {
  fs::create_directories(out);
  const fs::path path = run_lock_file(out);
  fd_ = open_lock_file(path);
  try {
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) refuse(out, holder_of_lock(out, fd_));
    owns_ = settle_owner(out, owner_of(::getpid(), what)) == Settled::taken;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

RunLock::~RunLock() {
  if (owns_) {
    try {
      const OwnerFile f(owner_file_);
      const auto cur = f.read();
      if (cur && cur->pid == ::getpid()) f.clear();
    } catch (...) {
      // The line stays; it names an ended process, which the next driver takes over.
    }
  }
  ::close(fd_);
}

void claim_for_recipe(const fs::path& out, const RunOwner& owner, int fd) {
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) refuse(out, holder_of_lock(out, fd));
  settle_owner(out, owner);
}

}  // namespace braid::driver
