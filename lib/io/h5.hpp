// A thin RAII layer over the HDF5 C API, used by braid's file formats. Every
// failure becomes a braid::InputError that names the file (as the user knows
// it) and the dataset or attribute, instead of HDF5's own error stack, which is
// silenced (per thread: Debian's HDF5 is built thread-safe, which keeps an error
// stack per thread and serializes every call). Use one file object from one
// thread at a time. A write that fails (disk full) names the file, the dataset
// and the reason the file system gave ("No space left on device").
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace braid {
class InputError;
}

namespace braid::io::h5 {

// Owns one HDF5 identifier of any kind (file, dataset, dataspace, type, property
// list, attribute, group) and releases it when destroyed.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  // Releases the id now; returns false when HDF5 reports a failure (a failed flush).
  bool reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// What a dataset holds, as found in the file.
struct DatasetInfo {
  std::vector<std::int64_t> dims;
  H5T_class_t type_class = H5T_NO_CLASS;
  std::size_t type_size = 0;
  bool is_signed = true;
  std::int64_t elements() const;
  // "int32", "uint8", "float32", "string", ...
  std::string type_name() const;
};

// Dataset checksums. Every dataset braid writes carries the string attribute
// "checksum" = "xxh3-64:<16 hex digits>": XXH3-64 (seed 0, libxxhash) of the
// dataset's values in their stored type, little-endian, row-major. Every whole
// read verifies it (a slice read hashes the whole dataset first); a mismatch is
// an InputError naming the file and the dataset. Datasets without the attribute
// (files written before it, or by other programs) are read unverified.
inline constexpr const char* kChecksumAttr = "checksum";
inline constexpr const char* kChecksumAlgorithm = "xxh3-64";
// "xxh3-64:0123456789abcdef" for these bytes.
std::string checksum_of(const void* data, std::size_t bytes);

// What File::verify_checksums found, dataset paths in each list.
struct ChecksumReport {
  std::vector<std::string> verified;    // checksum present and equal
  std::vector<std::string> absent;      // no checksum attribute
  std::vector<std::string> mismatched;  // "/path: why" for each damaged dataset
};

// How a 1-D array is laid out on disk: chunked and deflated (sample data) or
// contiguous (weights: large, incompressible, read whole).
enum class Storage { compressed, contiguous };

// An open HDF5 file. `name` is what messages call it (the final path of a file
// being written under a temporary name).
class File {
 public:
  // Creates (truncates) `actual`; messages say `name`.
  static File create(const std::filesystem::path& actual, std::string name);
  // Opens read-only. InputError when it does not exist, is not HDF5, or is
  // damaged or truncated (HDF5 checks the end-of-file address on open).
  static File open_read(const std::filesystem::path& path);

  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  ~File() = default;

  hid_t id() const noexcept { return file_.get(); }
  const std::string& name() const noexcept { return name_; }

  // ---- attributes of the root group
  bool has_attr(const std::string& attr) const;
  // nullopt when absent; InputError when present but not a string / integer.
  std::optional<std::string> attr_string(const std::string& attr) const;
  std::optional<std::int64_t> attr_int(const std::string& attr) const;
  // Fixed-length UTF-8 string; scalar 64-bit integer.
  void set_attr(const std::string& attr, std::string_view value);
  void set_attr(const std::string& attr, std::int64_t value);

  // ---- datasets (path like "tokens" or "logprobs/actor"; groups are created as needed)
  bool has_dataset(const std::string& path) const;
  // InputError when absent or not a dataset.
  DatasetInfo dataset_info(const std::string& path) const;
  // Paths of every dataset in the file, sorted ("logprobs/actor", "tokens", ...).
  std::vector<std::string> dataset_paths() const;

  template <typename T>
  void write_1d(const std::string& path, std::span<const T> data, Storage storage = Storage::compressed);
  void write_tensor(const std::string& path, const std::vector<std::int64_t>& dims, const float* data);

  // Reads a whole dataset into dst (room for `count` elements, which must be its
  // size). The stored type must convert to T without loss (int16 -> int32 is
  // fine, int64 -> int32 or float64 -> float32 is refused with the types named).
  template <typename T>
  void read(const std::string& path, T* dst, std::size_t count) const;
  template <typename T>
  std::vector<T> read_1d(const std::string& path) const;
  // Reads the box [start, start + count) of a float dataset into dst (row-major).
  void read_box(const std::string& path, const std::vector<std::int64_t>& start,
                const std::vector<std::int64_t>& count, float* dst) const;
  // The length of a 1-D dataset whose type read<T> accepts, without reading it.
  template <typename T>
  std::int64_t length_1d(const std::string& path) const;

  // Reads every dataset whole and compares it with its checksum; never throws
  // for a mismatch (they are listed), so one call finds every damaged dataset.
  ChecksumReport verify_checksums() const;

  // Flushes and closes; throws InputError when HDF5 reports a failure.
  void close();

 private:
  File(Handle file, std::string name) : file_(std::move(file)), name_(std::move(name)) {}
  [[noreturn]] static void name_damaged_datasets(const std::filesystem::path& path, const std::string& name,
                                                 const InputError& broken);
  // Throws an InputError naming the dataset when its declared extent cannot fit in the file.
  void expect_plausible_extent(hid_t d, const std::string& path, const std::vector<std::int64_t>& dims,
                               std::size_t type_size) const;
  // Stores checksum_of(data, bytes) on the open dataset d.
  void store_checksum(hid_t d, const std::string& path, const void* data, std::size_t bytes);
  // The dataset's stored checksum (nullopt when absent) ...
  std::optional<std::string> stored_checksum(hid_t d, const std::string& path) const;
  // ... and the checksum of its values, read whole in the stored type.
  std::string compute_checksum(hid_t d, const std::string& path) const;
  // Throws "checksum mismatch" unless `actual` equals the stored checksum (if any).
  void expect_checksum(const std::string& path, const std::optional<std::string>& stored,
                       const std::string& actual) const;
  Handle file_;
  std::string name_;
  std::filesystem::path actual_;  // the file being written, sealed by close(); empty when reading
};

// The scalar string attribute `attr` of any object (root group, dataset), read the one way
// braid reads strings; nullopt when absent, InputError(file, field) when not a single string.
std::optional<std::string> read_string_attr(hid_t obj, const std::string& attr, const std::string& file,
                                            const std::string& field);

// Turns off HDF5's printing of its error stack for the calling thread (idempotent;
// File does it in every thread that opens, writes or closes a file).
void silence_errors();
// "1.10.8"
std::string library_version();

}  // namespace braid::io::h5
