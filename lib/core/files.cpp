#include "core/files.hpp"

#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/limits.hpp"

namespace braid {
namespace fs = std::filesystem;

// ---- registry of temp files, readable from a signal handler ----------------
namespace {

constexpr int kSlots = 256;
constexpr size_t kPathMax = 4096;
struct Slot {
  std::atomic<bool> claimed{false};  // owned by an AtomicFile or AtomicFolder
  std::atomic<bool> used{false};     // path is complete: the signal handler may unlink it
  bool folder = false;               // an AtomicFolder's: removed (rmdir) after the files
  char path[kPathMax];
};
std::array<Slot, kSlots> g_slots;

// Process groups of children to end with the process (an external scorer's).
constexpr int kGroups = 16;
std::array<std::atomic<int>, kGroups> g_groups{};

int register_temp(const fs::path& p, bool folder = false) {
  const std::string s = p.string();
  if (s.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_slots[i].claimed.compare_exchange_strong(expected, true)) {
      std::memcpy(g_slots[i].path, s.c_str(), s.size() + 1);
      g_slots[i].folder = folder;
      g_slots[i].used.store(true);
      return i;
    }
  }
  return -1;  // more than kSlots open at once: still atomic, only not cleaned on signals
}

void unregister_temp(int slot) {
  if (slot < 0) return;
  g_slots[slot].used.store(false);
  g_slots[slot].claimed.store(false);
}

extern "C" void cleanup_and_reraise(int sig) {
  for (auto& g : g_groups) {
    if (const int pgid = g.load(); pgid > 0) ::kill(-pgid, SIGTERM);
  }
  for (auto& slot : g_slots) {
    if (slot.used.load() && !slot.folder) ::unlink(slot.path);
  }
  for (auto& slot : g_slots) {
    if (slot.used.load() && slot.folder) ::rmdir(slot.path);  // empty now: its files went above
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// A random decimal for a temp name: another process cannot guess it and plant a link there.
std::string random_suffix() {
  std::uint64_t r = 0;
  if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    static std::atomic<std::uint64_t> fallback{0};
    r = (static_cast<std::uint64_t>(::getpid()) << 32) ^ static_cast<std::uint64_t>(::time(nullptr)) ^
        (fallback.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
  }
  return std::to_string(r);
}

// ".NAME.tmp-PID-N" beside final (N random).
fs::path temp_name_for(const fs::path& final) {
  return final.parent_path() / ("." + final.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                random_suffix());
}

std::string errno_text(int err) { return std::strerror(err); }

// 0, or the errno of a failed fsync/close (a file system may report a full disk
// only there).
int fsync_path(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags);
  if (fd < 0) return 0;
  int err = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Removes the temp files ".NAME.tmp-PID-N" of `final` left by a process that no
// longer exists (killed by SIGKILL or power loss). A temp whose PID is alive may
// belong to a writer at work and is left alone; so is anything not of that form.
void remove_stale_temps(const fs::path& dir, const fs::path& final) {
  const std::string prefix = "." + final.filename().string() + ".tmp-";
  std::error_code ec;
  fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec);
  if (ec) return;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // The rest must be PID-N, both decimal.
    const std::string rest = name.substr(prefix.size());
    const auto dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) continue;
    if (rest.find_first_not_of("0123456789-") != std::string::npos || rest.find('-', dash + 1) != std::string::npos) {
      continue;
    }
    if (dash > 9) continue;  // not a PID
    const long pid = std::stol(rest.substr(0, dash));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to know)
    std::error_code rm;
    if (entry.is_symlink(rm) || entry.is_regular_file(rm)) fs::remove(entry.path(), rm);
    else if (entry.is_directory(rm)) fs::remove_all(entry.path(), rm);
  }
}

}  // namespace

void end_group_on_signals(int pgid) {
  for (auto& g : g_groups) {
    int expected = 0;
    if (g.compare_exchange_strong(expected, pgid)) return;
  }
}

void forget_group_on_signals(int pgid) {
  for (auto& g : g_groups) {
    int expected = pgid;
    g.compare_exchange_strong(expected, 0);
  }
}

void install_temp_cleanup_on_signals() {
  ::signal(SIGXFSZ, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = cleanup_and_reraise;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
    sigaction(sig, &sa, nullptr);
  }
}

// ---- AtomicFile --------------------------------------------------------------

AtomicFile::AtomicFile(fs::path final_path) : final_(std::move(final_path)) {
  if (final_.empty()) throw InputError("", "", "empty output path");
  fs::path dir = final_.parent_path();
  if (!dir.empty() && !fs::is_directory(dir)) {
    throw InputError(final_.string(), "", "cannot write here: folder " + dir.string() + " does not exist");
  }
  remove_stale_temps(dir, final_);
  for (int attempt = 0;; ++attempt) {
    temp_ = temp_name_for(final_);
    slot_ = register_temp(temp_);
    const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    const int err = errno;
    unregister_temp(slot_);
    slot_ = -1;
    if (err != EEXIST || attempt == 16) {
      done_ = true;
      throw InputError(final_.string(), "", "cannot create a file in " + (dir.empty() ? std::string(".") : dir.string()) +
                                                ": " + errno_text(err));
    }
  }
}

AtomicFile::~AtomicFile() {
  if (!done_) discard();
}

namespace {
thread_local CommitGroup* t_group = nullptr;

// Renames a finished temp file onto its final name; InputError when it cannot.
void rename_onto(const fs::path& temp, const fs::path& final) {
  if (::rename(temp.c_str(), final.c_str()) != 0) {
    throw InputError(final.string(), "", "cannot rename the finished file onto it: " + errno_text(errno));
  }
  fs::path dir = final.parent_path();
  fsync_path(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY);
}
}  // namespace

void AtomicFile::commit() {
  if (done_) throw std::logic_error("AtomicFile::commit called twice for " + final_.string());
  if (!fs::exists(temp_)) {
    throw std::runtime_error("nothing was written to " + temp_.string() + " for " + final_.string());
  }
  if (const int err = fsync_path(temp_, O_RDONLY); err != 0) {
    discard();
    throw InputError(final_.string(), "", std::string("write failed: ") + std::strerror(err));
  }
  if (t_group != nullptr) {  // renamed with the rest of the group
    t_group->pending_.push_back({temp_, final_, slot_});
    done_ = true;
    return;
  }
  try {
    rename_onto(temp_, final_);
  } catch (...) {
    discard();
    throw;
  }
  unregister_temp(slot_);
  done_ = true;
}

CommitGroup::CommitGroup() : outer_(t_group) { t_group = this; }

CommitGroup::~CommitGroup() {
  if (t_group == this) t_group = outer_;
  for (const Pending& p : pending_) {
    std::error_code ec;
    fs::remove(p.temp, ec);
    unregister_temp(p.slot);
  }
}

void CommitGroup::commit() {
  if (t_group == this) t_group = outer_;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    rename_onto(pending_[i].temp, pending_[i].final);
    unregister_temp(pending_[i].slot);
    pending_[i].temp.clear();
    pending_[i].slot = -1;
  }
  pending_.clear();
}

void AtomicFile::discard() noexcept {
  if (done_) return;
  std::error_code ec;
  fs::remove(temp_, ec);
  unregister_temp(slot_);
  done_ = true;
}

void write_all(const AtomicFile& out, std::string_view bytes) {
  const std::string name = out.final_path().string();
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw InputError(name, "", std::string("cannot create: ") + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      throw InputError(name, "", std::string("write failed: ") + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) throw InputError(name, "", std::string("write failed: ") + std::strerror(errno));
}

// ---- text files ----------------------------------------------------------------

namespace {

// What a path that is not a regular file is, for the refusal ("a character device").
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// BRAID_READ_TIMEOUT (seconds, > 0), read once per process.
double read_timeout_seconds() {
  static const double seconds = [] {
    const char* text = std::getenv("BRAID_READ_TIMEOUT");
    if (text == nullptr || *text == '\0') return kDefaultReadTimeoutSeconds;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0) || v > 1e9) {
      throw UsageError(std::string("BRAID_READ_TIMEOUT is \"") + text + "\": expected seconds, a number > 0");
    }
    return v;
  }();
  return seconds;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads fd to its end, at most `limit` bytes. With a deadline (a FIFO or socket named by a
// path), a wait of `timeout` seconds without a byte is an InputError.
std::string read_fd(int fd, const std::string& name, std::uint64_t limit, double timeout) {
  std::string text;
  char buf[65536];
  for (;;) {
    if (timeout > 0) {
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min(timeout, 2e6) * 1000));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        throw InputError(name, "", fmt::format("no data came for {:g} s (a FIFO that nothing writes to?); "
                                               "BRAID_READ_TIMEOUT sets the time", timeout));
      }
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EAGAIN && timeout <= 0) {  // a nonblocking stdin: wait for it
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw InputError(name, "", "read error: " + errno_text(errno));
    if (n == 0) return text;
    if (text.size() + static_cast<std::size_t>(n) > limit) {
      throw InputError(name, "", fmt::format("holds more than {} bytes: too large for a text input", limit));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw InputError(path, "", errno == ENOENT ? std::string("no such file") : "cannot be read: " + errno_text(errno));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(path, "", "is a folder, not a file");
  if (!S_ISREG(st.st_mode)) throw InputError(path, "", "is " + kind_of(st.st_mode) + ", not a regular file");
}

std::string read_text_file(const std::string& path) {
  if (is_std_stream(path)) return read_fd(STDIN_FILENO, "<stdin>", kMaxTextBytes, 0);
  // Nonblocking: opening a FIFO without a writer returns at once (the wait is then poll's).
  const FdCloser fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (fd.fd < 0) {
    throw InputError(path, "", errno == ENOENT ? std::string("no such file") : "cannot open: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw InputError(path, "", "cannot be read: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(path, "", "is a folder, not a file");
  if (S_ISREG(st.st_mode)) {
    const auto size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t limit = std::min(kMaxTextBytes, host_memory_limit());
    if (size > limit) {
      throw InputError(path, "", fmt::format("is {} bytes, more than a text input may be here ({} bytes)", size, limit));
    }
    ::fcntl(fd.fd, F_SETFL, ::fcntl(fd.fd, F_GETFL) & ~O_NONBLOCK);
    return read_fd(fd.fd, path, limit, 0);
  }
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) return read_fd(fd.fd, path, kMaxTextBytes, read_timeout_seconds());
  throw InputError(path, "", "is " + kind_of(st.st_mode) + ", not a file braid reads");
}

void write_text_file(const std::string& path, std::string_view text) {
  if (is_std_stream(path)) {
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    return;
  }
  AtomicFile out(path);
  write_all(out, text);
  out.commit();
}

std::string path_line(const std::string& path) {
  if (path.find_first_of("\n\r") == std::string::npos && (path.empty() || path.front() != '"')) return path;
  return json(path).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string path_from_line(std::string_view line, const std::string& origin) {
  if (line.empty() || line.front() != '"') return std::string(line);
  const json v = parse_json_or_discarded(line);
  if (!v.is_string()) {
    throw InputError(origin, "", fmt::format("a path line starting with a double quote is not a JSON string: {}",
                                             std::string(line.substr(0, 80))));
  }
  return v.get<std::string>();
}

// ---- AtomicFolder ---------------------------------------------------------------

AtomicFolder::AtomicFolder(fs::path final_path) : final_(std::move(final_path).lexically_normal()) {
  if (!final_.has_filename()) final_ = final_.parent_path();  // "out/" is the folder out
  if (final_.empty()) throw InputError("", "", "empty output path");
  const fs::path dir = final_.parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::create_directories(dir, ec) && ec) {
    // libstdc++ names the component that failed ("a/file"), not the folder asked for.
    throw InputError(final_.string(), "", "cannot create its parent folder " + dir.string() + ": " + ec.message());
  }
  if (fs::exists(final_, ec) && !fs::is_directory(final_, ec)) {
    throw InputError(final_.string(), "", "exists and is not a folder");
  }
  remove_stale_temps(dir, final_);
  temp_ = temp_name_for(final_);
  slot_ = register_temp(temp_, /*folder=*/true);
  if (::mkdir(temp_.c_str(), 0777) != 0) {
    const int err = errno;
    unregister_temp(slot_);
    done_ = true;
    throw InputError(final_.string(), "", "cannot create a folder in " + (dir.empty() ? std::string(".") : dir.string()) +
                                              ": " + errno_text(err));
  }
}

AtomicFolder::~AtomicFolder() {
  if (done_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
  unregister_temp(slot_);
}

fs::path AtomicFolder::final_of(const fs::path& temp_file) const { return final_ / temp_file.lexically_relative(temp_); }

void AtomicFolder::commit() {
  if (done_) throw std::logic_error("AtomicFolder::commit called twice for " + final_.string());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temp_)) {
    if (const int err = fsync_path(entry.path(), O_RDONLY); err != 0) {
      throw InputError(final_of(entry.path()).string(), "", "write failed: " + errno_text(err));
    }
  }
  fsync_path(temp_, O_RDONLY | O_DIRECTORY);
  if (!fs::exists(final_, ec)) {
    if (::rename(temp_.c_str(), final_.c_str()) != 0) {
      throw InputError(final_.string(), "", "cannot rename the finished folder onto it: " + errno_text(errno));
    }
  } else {
    for (const auto& entry : fs::directory_iterator(temp_)) {
      const fs::path to = final_of(entry.path());
      if (fs::is_directory(to, ec)) throw InputError(to.string(), "", "is a folder: cannot put the file written here");
      if (::rename(entry.path().c_str(), to.c_str()) != 0) {
        throw InputError(to.string(), "", "cannot rename the finished file onto it: " + errno_text(errno));
      }
    }
    fs::remove(temp_, ec);
  }
  unregister_temp(slot_);
  done_ = true;
  const fs::path dir = final_.parent_path();
  fsync_path(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY);
}

void write_stdout_line(const std::string& text, const char* what) {
  const std::string line = text + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), std::string("writing ") + what + " to standard output");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace braid
