// Files the way every braid tool treats them: "-" means stdin/stdout, errors
// name the file, and outputs appear under their final name only when complete.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace braid {

// True for the "-" that stands for stdin or stdout.
inline bool is_std_stream(std::string_view path) { return path == "-"; }

// The whole content of a file ("-": stdin). Throws InputError naming the file.
std::string read_text_file(const std::string& path);

// `text` and a newline on standard output in one write() where the pipe allows (a
// line of one process never interleaves mid-line with another writer's, up to PIPE_BUF),
// retried on EINTR; std::system_error naming `what` when the write fails.
void write_stdout_line(const std::string& text, const char* what);

// Writes text to path atomically ("-": stdout, written directly).
void write_text_file(const std::string& path, std::string_view text);

// A file written under a temporary name in the destination's folder and renamed
// onto its final name by commit(), after an fsync. Until then no reader can see
// it under the final name; if the object is destroyed uncommitted (an exception)
// or the process dies of SIGINT/SIGTERM/SIGHUP, the temp file is removed. Only a
// SIGKILL or power loss can leave one behind: it is named ".NAME.tmp-PID-N" and
// never matches the final name. The next AtomicFile for the same final name
// removes such leftovers whose PID is no longer running. A failed write or fsync
// (disk full) is an InputError naming the final file; the temp file is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Where to write (a path that does not exist yet).
  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  const std::filesystem::path& final_path() const noexcept { return final_; }

  // fsyncs the temp file and renames it onto the final path (replacing any old file).
  void commit();
  // Removes the temp file now.
  void discard() noexcept;

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  int slot_ = -1;
  bool done_ = false;
};

// Writes bytes to out's temp file (created or truncated); InputError naming the
// final file and the reason ("No space left on device") when a write fails.
void write_all(const AtomicFile& out, std::string_view bytes);

// Installs SIGINT/SIGTERM/SIGHUP handlers that unlink every uncommitted
// AtomicFile's temp file, then die of the same signal. cli::run() calls it.
void install_temp_cleanup_on_signals();

}  // namespace braid
