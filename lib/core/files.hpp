// Files the way every braid tool treats them: "-" means stdin/stdout, errors
// name the file, and outputs appear under their final name only when complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

// True for the "-" that stands for stdin or stdout.
inline bool is_std_stream(std::string_view path) { return path == "-"; }

// The whole content of a file ("-": stdin). Throws InputError naming the file. A path is
// checked by its type before it is read: a folder or a device (/dev/zero, /dev/urandom, a
// terminal) is refused; a FIFO or socket is read with a deadline, an InputError when no byte
// comes for BRAID_READ_TIMEOUT seconds (default kDefaultReadTimeoutSeconds: a FIFO nobody
// writes to). Whatever it is, a text past kMaxTextBytes (or a regular file larger than the
// memory the process may take) is refused before it is read whole.
inline constexpr double kDefaultReadTimeoutSeconds = 60;
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t(1) << 34;  // 16 GiB
std::string read_text_file(const std::string& path);

// Throws InputError naming path unless it is a regular file (links followed): a missing
// path, a folder, a device, a FIFO or a socket is refused by its type before anything opens
// it (opening a FIFO without a writer blocks; /dev/zero never ends).
void require_regular_file(const std::string& path);

// One path per line, as the tools print the files they wrote and read them from stdin
// ("-"): a path is written as it is, unless it holds a newline or a carriage return or starts
// with a double quote; then as a JSON string ("run\n1/gen-00000.h5"), which
// path_from_line turns back. Throws InputError naming `origin` for a quoted line that is
// not a JSON string.
std::string path_line(const std::string& path);
std::string path_from_line(std::string_view line, const std::string& origin);

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
// The temp file is created by the constructor, exclusively and without following a
// link (O_CREAT | O_EXCL | O_NOFOLLOW), under a name whose N is random: a link or
// file planted at a guessed temp name is never written through. A folder that cannot
// take the file (read-only, missing) is an InputError naming the final file.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Where to write: an empty regular file this object created.
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

// Outputs that appear together or not at all (a training step's new actor, critic and
// their optimizer states). While a CommitGroup lives, AtomicFile::commit() on its thread
// fsyncs the temp file and leaves it under its temp name; the group's commit() renames them
// all onto their final names. Destroyed without commit() (an exception: a diverged critic,
// a full disk), it removes them, so that nothing of the step appears.
class CommitGroup {
 public:
  CommitGroup();
  ~CommitGroup();
  CommitGroup(const CommitGroup&) = delete;
  CommitGroup& operator=(const CommitGroup&) = delete;
  void commit();

 private:
  friend class AtomicFile;
  struct Pending {
    std::filesystem::path temp, final;
    int slot;
  };
  std::vector<Pending> pending_;
  CommitGroup* outer_;
};

// Writes bytes to out's temp file (truncated); InputError naming the
// final file and the reason ("No space left on device") when a write fails.
void write_all(const AtomicFile& out, std::string_view bytes);

// A folder of files written under a temporary sibling folder (".NAME.tmp-PID-N"; the folders
// above are created when missing) and
// moved into place by commit(): renamed whole when the folder does not exist yet, else
// file by file, each rename atomic. Until then nothing appears under the final folder;
// destroyed uncommitted (an exception) or on SIGINT/SIGTERM/SIGHUP, the temp folder
// and the files in it are removed.
class AtomicFolder {
 public:
  explicit AtomicFolder(std::filesystem::path final_path);
  ~AtomicFolder();
  AtomicFolder(const AtomicFolder&) = delete;
  AtomicFolder& operator=(const AtomicFolder&) = delete;

  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  const std::filesystem::path& final_path() const noexcept { return final_; }
  // The final path of a file written at temp_path() / name.
  std::filesystem::path final_of(const std::filesystem::path& temp_file) const;
  void commit();

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  int slot_ = -1;
  bool done_ = false;
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that unlink every uncommitted
// AtomicFile's temp file (and AtomicFolder's), end the process groups registered below,
// then die of the same signal; and ignores SIGXFSZ, so that a write past a file-size limit
// (ulimit -f) fails with EFBIG and is refused like a full disk instead of killing the
// process with its temp files left. cli::run() calls it.
void install_temp_cleanup_on_signals();

// A child's process group (an external scorer and whatever it started) that the signal
// handlers above end with SIGTERM before the process dies; unregistered once reaped.
void end_group_on_signals(int pgid);
void forget_group_on_signals(int pgid);

}  // namespace braid
