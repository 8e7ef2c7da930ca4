#include "core/files.hpp"

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

void fsync_path(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
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
  fsync_path(temp_, O_RDONLY);
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
  {
    std::ofstream f(out.temp_path(), std::ios::binary);
    if (!f) throw InputError(path, "", std::string("cannot create: ") + std::strerror(errno));
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f) throw InputError(path, "", "write failed (disk full?)");
  }
  out.commit();
}

}  // namespace braid
