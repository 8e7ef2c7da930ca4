#include "core/files.hpp"

#include <system_error>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "core/error.hpp"

namespace braid {
namespace fs = std::filesystem;

// ---- registry of temp files, readable from a signal handler ----------------
namespace {

constexpr int kSlots = 256;
constexpr size_t kPathMax = 4096;
struct Slot {
  std::atomic<bool> claimed{false};  // owned by an AtomicFile
  std::atomic<bool> used{false};     // path is complete: the signal handler may unlink it
  char path[kPathMax];
};
std::array<Slot, kSlots> g_slots;
std::atomic<unsigned> g_counter{0};

int register_temp(const fs::path& p) {
  const std::string s = p.string();
  if (s.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_slots[i].claimed.compare_exchange_strong(expected, true)) {
      std::memcpy(g_slots[i].path, s.c_str(), s.size() + 1);
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
  for (auto& slot : g_slots) {
    if (slot.used.load()) ::unlink(slot.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

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
    if (entry.is_regular_file(rm)) fs::remove(entry.path(), rm);
  }
}

}  // namespace

void install_temp_cleanup_on_signals() {
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
  const std::string name = "." + final_.filename().string() + ".tmp-" + std::to_string(::getpid()) +
                           "-" + std::to_string(g_counter.fetch_add(1));
  temp_ = dir / name;
  remove_stale_temps(dir, final_);
  slot_ = register_temp(temp_);
}

AtomicFile::~AtomicFile() {
  if (!done_) discard();
}

void AtomicFile::commit() {
  if (done_) throw std::logic_error("AtomicFile::commit called twice for " + final_.string());
  if (!fs::exists(temp_)) {
    throw std::runtime_error("nothing was written to " + temp_.string() + " for " + final_.string());
  }
  if (const int err = fsync_path(temp_, O_RDONLY); err != 0) {
    discard();
    throw InputError(final_.string(), "", std::string("write failed: ") + std::strerror(err));
  }
  if (::rename(temp_.c_str(), final_.c_str()) != 0) {
    const int err = errno;
    discard();
    throw InputError(final_.string(), "", std::string("cannot rename the finished file onto it: ") +
                                              std::strerror(err));
  }
  unregister_temp(slot_);
  done_ = true;
  fs::path dir = final_.parent_path();
  fsync_path(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY);
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
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
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

std::string read_text_file(const std::string& path) {
  if (is_std_stream(path)) {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path, "", "is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(path, "", "read error");
  return text;
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
