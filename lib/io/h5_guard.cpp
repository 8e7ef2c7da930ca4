#include "io/h5_guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>
#include <xxhash.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/inspect.hpp"

extern char** environ;

namespace braid::io::h5 {
namespace {

constexpr std::string_view kSealMagic = "BRAID-SEAL 1 ";
// The child's instructions, on its command line: {exe, kProbeArg, file, pid of the waiting
// parent}. Not the environment, which a user's shell (or a tool's parent) passes on: a
// variable left set there made every tool a probe that exited 0 at once. A command line of
// this exact form, its pid the parent's, is not one a user types by accident.
constexpr const char* kProbeArg = "\x01braid-h5-probe";

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::string errno_text() { return std::strerror(errno); }

// XXH3-64 of the file's bytes from `offset` to its end; `length` receives their count.
std::uint64_t hash_from(int fd, std::uint64_t offset, std::uint64_t& length, const std::string& name) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  XXH3_64bits_reset(state.get());
  constexpr std::size_t kBlock = 1 << 20;
  std::unique_ptr<char[]> buf(new char[kBlock]);
  length = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.get(), kBlock, static_cast<off_t>(offset + length));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(name, "", "cannot be read: " + errno_text());
    }
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buf.get(), static_cast<std::size_t>(n));
    length += static_cast<std::uint64_t>(n);
  }
  return XXH3_64bits_digest(state.get());
}

// ---- the probe's child: read everything libhdf5 can be asked to read

void read_attributes(hid_t obj, std::uint64_t file_bytes) {
  H5O_info_t info;
  if (H5Oget_info(obj, &info) < 0) return;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    // Strings the way braid's readers read them (the type conversion is where libhdf5 fails).
    char attr_name[1024] = {};
    if (H5Aget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, attr_name, sizeof attr_name, H5P_DEFAULT) > 0) {
      try {
        (void)read_string_attr(obj, attr_name, "", "");
      } catch (...) {
      }
    }
    const hid_t a = H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) continue;
    const hid_t t = H5Aget_type(a);
    const hid_t mem = t < 0 ? -1 : H5Tget_native_type(t, H5T_DIR_ASCEND);
    const hid_t space = H5Aget_space(a);
    const hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    const std::size_t size = mem < 0 ? 0 : H5Tget_size(mem);
    if (n >= 0 && size > 0 && fits_in_file(static_cast<std::uint64_t>(n), size, file_bytes, /*filtered=*/true)) {
      // Variable-length values are left unreclaimed: the child exits right after.
      std::vector<char> buf(static_cast<std::size_t>(n) * size + 1);
      (void)H5Aread(a, mem, buf.data());
      if (n == 1 && H5Tget_class(mem) == H5T_INTEGER) {  // as File::attr_int reads it
        std::int64_t v = 0;
        (void)H5Aread(a, H5T_NATIVE_INT64, &v);
      }
    }
    for (hid_t id : {space, mem, t, a}) {
      if (id >= 0) H5Idec_ref(id);
    }
  }
}

void read_dataset(hid_t d, std::uint64_t file_bytes, bool values) {
  const hid_t t = H5Dget_type(d);
  const hid_t mem = t < 0 ? -1 : H5Tget_native_type(t, H5T_DIR_ASCEND);
  const hid_t space = H5Dget_space(d);
  const hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
  const std::size_t size = mem < 0 ? 0 : H5Tget_size(mem);
  if (values && n > 0 && size > 0 && fits_in_file(static_cast<std::uint64_t>(n), size, file_bytes, /*filtered=*/true)) {
    // As stored, then converted the way braid's readers convert numbers (to float, to int64).
    const H5T_class_t cls = H5Tget_class(mem);
    hid_t converted = cls == H5T_FLOAT ? H5T_NATIVE_FLOAT : cls == H5T_INTEGER ? H5T_NATIVE_INT64 : -1;
    if (converted >= 0 && H5Tequal(mem, converted) > 0) converted = -1;  // the same read again
    const std::size_t width = std::max<std::size_t>(size, 8);
    std::unique_ptr<char[]> buf(new (std::nothrow) char[static_cast<std::size_t>(n) * width]);
    if (buf) {
      (void)H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.get());
      if (converted >= 0) (void)H5Dread(d, converted, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.get());
    }
  }
  for (hid_t id : {space, mem, t}) {
    if (id >= 0) H5Idec_ref(id);
  }
}

struct Walk {
  std::uint64_t file_bytes;
  bool values;  // read the datasets' values too (braid's own full read did not finish)
};

herr_t visit(hid_t file, const char* name, const H5O_info_t* info, void* data) {
  const auto* walk = static_cast<const Walk*>(data);
  const hid_t obj = H5Oopen(file, name, H5P_DEFAULT);
  if (obj < 0) return 0;
  read_attributes(obj, walk->file_bytes);
  if (info->type == H5O_TYPE_DATASET) read_dataset(obj, walk->file_bytes, walk->values);
  H5Oclose(obj);
  return 0;
}

// True in a probe child, whose own opens of the file must not start another probe.
bool probing = false;

// Runs in the child, before main: reads the file whole, then exits 0 whatever HDF5 said.
// Only a crash (a signal, a sanitizer's report) or a hang tells the parent anything.
[[noreturn]] void run_probe_child(const char* path) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  H5Eset_auto(H5E_DEFAULT, nullptr, nullptr);
  probing = true;
  // First exactly as braid reads its files (braid check's full read: header, every checksum,
  // every value), then every object, attribute and dataset, whatever braid would read of it.
  // When that read went through, braid's readers have read every value already.
  const bool read_through = !check_file(path).has_value();
  const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f >= 0) {
    hsize_t file_bytes = 0;
    H5Fget_filesize(f, &file_bytes);
    Walk walk{file_bytes, !read_through};
    (void)H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, visit, &walk);
    H5Fclose(f);
  }
  ::_exit(0);
}

// A process started as {exe, kProbeArg, file, parent pid} by its parent is a probe child: it
// never reaches main. glibc hands .init_array functions the program's argc and argv.
void probe_if_asked(int argc, char** argv, char**) {
  if (argc == 4 && std::strcmp(argv[1], kProbeArg) == 0 && std::to_string(::getppid()) == argv[3]) {
    run_probe_child(argv[2]);
  }
}
[[gnu::used, gnu::section(".init_array")]] void (*probe_hook)(int, char**, char**) = probe_if_asked;

double probe_timeout_seconds(std::uint64_t file_bytes) {
  if (const char* text = std::getenv("BRAID_H5_PROBE_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0) || v > 1e6) {
      throw UsageError(fmt::format("BRAID_H5_PROBE_TIMEOUT is \"{}\": expected seconds, a number > 0", text));
    }
    return v;
  }
  return 10.0 + static_cast<double>(file_bytes) / 100e6;
}

}  // namespace

bool fits_in_file(std::uint64_t elements, std::size_t type_size, std::uint64_t file_bytes, bool filtered,
                  std::uint64_t* bytes) {
  constexpr std::uint64_t kMaxDeflateRatio = 1100;
  std::uint64_t b = 0;
  const bool overflow = __builtin_mul_overflow(elements, static_cast<std::uint64_t>(type_size), &b);
  if (bytes != nullptr) *bytes = overflow ? 0 : b;
  return !overflow && static_cast<double>(b) <= static_cast<double>(file_bytes) * (filtered ? kMaxDeflateRatio : 1);
}

void write_seal(const std::filesystem::path& actual, const std::string& name) {
  Fd fd(::open(actual.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.fd < 0) throw InputError(name, "", "cannot reopen the file to seal it: " + errno_text());
  std::uint64_t length = 0;
  const std::uint64_t hash = hash_from(fd.fd, kSealBlock, length, name);
  std::array<char, kSealBlock> block{};
  const std::string line = fmt::format("{}xxh3-64:{:016x} bytes:{}\n", kSealMagic, hash, length);
  std::memcpy(block.data(), line.data(), line.size());
  if (::pwrite(fd.fd, block.data(), block.size(), 0) != static_cast<ssize_t>(block.size())) {
    throw InputError(name, "", "cannot write its seal: " + errno_text());
  }
}

std::optional<Seal> read_seal(const std::filesystem::path& path, const std::string& name) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) throw InputError(name, "", "cannot be read: " + errno_text());
  std::array<char, kSealBlock> block{};
  const ssize_t n = ::pread(fd.fd, block.data(), block.size(), 0);
  if (n < static_cast<ssize_t>(kSealMagic.size()) || std::string_view(block.data(), kSealMagic.size()) != kSealMagic) {
    return std::nullopt;
  }
  const std::string text(block.data(), ::strnlen(block.data(), static_cast<std::size_t>(n)));
  char hex[17] = {};
  unsigned long long bytes = 0;
  int used = 0;
  if (std::sscanf(text.c_str() + kSealMagic.size(), "xxh3-64:%16[0-9a-f] bytes:%llu\n%n", hex, &bytes, &used) != 2 ||
      std::strlen(hex) != 16 || kSealMagic.size() + static_cast<std::size_t>(used) != text.size()) {
    throw InputError(name, "seal", "is damaged: the first line does not read \"BRAID-SEAL 1 xxh3-64:<hex> bytes:<n>\"");
  }
  return Seal{std::string("xxh3-64:") + hex, bytes};
}

void verify_seal(const std::filesystem::path& path, const std::string& name, const Seal& seal) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) throw InputError(name, "", "cannot be read: " + errno_text());
  std::uint64_t length = 0;
  const std::string actual = fmt::format("xxh3-64:{:016x}", hash_from(fd.fd, kSealBlock, length, name));
  if (length != seal.bytes) {
    throw InputError(name, "seal",
                     fmt::format("says {} bytes follow its block, but {} do: the file is truncated, extended or "
                                 "damaged",
                                 seal.bytes, length));
  }
  if (actual != seal.checksum) {
    throw InputError(name, "seal",
                     fmt::format("does not match the contents (sealed {}, they hash to {}): the file was damaged, "
                                 "or changed by another program after braid wrote it",
                                 seal.checksum, actual));
  }
}

std::string hash_file(const std::filesystem::path& path, std::uint64_t offset, const std::string& name) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) throw InputError(name, "", "cannot be read: " + errno_text());
  std::uint64_t length = 0;
  return fmt::format("xxh3-64:{:016x}", hash_from(fd.fd, offset, length, name));
}

void probe_unsealed(const std::filesystem::path& path, const std::string& name) {
  if (probing) return;
  // A reader opens a file several times (header, checksums, values): the contents the child
  // has read through once are not probed again in this process.
  std::uint64_t file_bytes = 0;
  std::string key;
  {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) throw InputError(name, "", "cannot be read: " + errno_text());
    const std::uint64_t hash = hash_from(fd.fd, 0, file_bytes, name);
    key = fmt::format("{:016x}:{}", hash, file_bytes);
  }
  static std::mutex mutex;
  static std::unordered_set<std::string> read_through;
  {
    const std::lock_guard lock(mutex);
    if (read_through.contains(key)) return;
  }
  const double timeout = probe_timeout_seconds(file_bytes);
  std::error_code ec;

  // The child is this very program started again (a fresh process: no threads, no HDF5 lock
  // held, no sanitizer or fuzzer state), which its command line turns into a probe before main.
  std::string exe = "/proc/self/exe", marker = kProbeArg, file = std::filesystem::absolute(path, ec).string(),
              parent = std::to_string(::getpid());
  char* argv[] = {exe.data(), marker.data(), file.data(), parent.data(), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw InputError(name, "", std::string("is not sealed by braid, and the process that checks such files "
                                           "cannot start: ") + std::strerror(rc));
  }

  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(50);
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw InputError(name, "", "cannot wait for the HDF5 check: " + errno_text());
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw InputError(name, "",
                       fmt::format("damaged HDF5 file: libhdf5 did not finish reading it in {:.0f} s (the file has "
                                   "no braid seal; BRAID_H5_PROBE_TIMEOUT sets the time)",
                                   timeout));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (WIFSIGNALED(status)) {
    throw InputError(name, "",
                     fmt::format("damaged HDF5 file: reading it crashes libhdf5 (signal {}, {}); the file has no "
                                 "braid seal",
                                 WTERMSIG(status), ::strsignal(WTERMSIG(status))));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    throw InputError(name, "",
                     fmt::format("damaged HDF5 file: libhdf5 fails reading it (the check exited {}); the file has no "
                                 "braid seal",
                                 WEXITSTATUS(status)));
  }
  const std::lock_guard lock(mutex);
  read_through.insert(key);
}

}  // namespace braid::io::h5
