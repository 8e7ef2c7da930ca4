#include "io/h5.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <xxhash.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "io/h5_guard.hpp"

namespace braid::io::h5 {
namespace {

// 64 Ki elements: large enough for deflate to work well, small enough that a
// reader of a few sequences does not inflate megabytes.
constexpr hsize_t kChunkElements = 64 * 1024;
constexpr unsigned kDeflateLevel = 4;

template <typename T>
struct TypeOf;
template <>
struct TypeOf<std::int32_t> {
  static hid_t memory() { return H5T_NATIVE_INT32; }
  static hid_t file() { return H5T_STD_I32LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
  static constexpr bool is_signed = true;
};
template <>
struct TypeOf<std::int64_t> {
  static hid_t memory() { return H5T_NATIVE_INT64; }
  static hid_t file() { return H5T_STD_I64LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
  static constexpr bool is_signed = true;
};
template <>
struct TypeOf<std::uint8_t> {
  static hid_t memory() { return H5T_NATIVE_UINT8; }
  static hid_t file() { return H5T_STD_U8LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
  static constexpr bool is_signed = false;
};
template <>
struct TypeOf<float> {
  static hid_t memory() { return H5T_NATIVE_FLOAT; }
  static hid_t file() { return H5T_IEEE_F32LE; }
  static constexpr H5T_class_t cls = H5T_FLOAT;
  static constexpr bool is_signed = true;
};
template <>
struct TypeOf<double> {
  static hid_t memory() { return H5T_NATIVE_DOUBLE; }
  static hid_t file() { return H5T_IEEE_F64LE; }
  static constexpr H5T_class_t cls = H5T_FLOAT;
  static constexpr bool is_signed = true;
};

std::string type_name_of(H5T_class_t cls, std::size_t size, bool is_signed) {
  switch (cls) {
    case H5T_INTEGER: return fmt::format("{}int{}", is_signed ? "" : "u", size * 8);
    case H5T_FLOAT: return fmt::format("float{}", size * 8);
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum (a numpy bool?)";
    case H5T_VLEN: return "variable-length";
    case H5T_ARRAY: return "array";
    default: return "an unsupported type";
  }
}

// Whether a stored type converts to T without losing values.
template <typename T>
bool converts_losslessly(const DatasetInfo& info) {
  if (info.type_class != TypeOf<T>::cls) return false;
  if (info.type_class == H5T_FLOAT) return info.type_size <= sizeof(T);
  if (TypeOf<T>::is_signed) {
    return info.is_signed ? info.type_size <= sizeof(T) : info.type_size < sizeof(T);
  }
  return !info.is_signed && info.type_size <= sizeof(T);
}

std::string display(const std::string& path) { return "/" + path; }

// HDF5 closes every identifier still open when the process exits. After a failed
// write (disk full) a dataset whose close failed stays registered half-freed, and
// closing it again at exit crashes inside HDF5 (SIGSEGV in H5D_close, after braid
// has printed its error). braid closes every file it writes explicitly, so nothing
// is lost by skipping that: this runs before main, before HDF5 is initialized.
[[maybe_unused]] const bool g_no_hdf5_atexit = [] {
  H5dont_atexit();
  return true;
}();

// Why the last HDF5 write failed, from the errno its file driver recorded on the
// error stack ("... errno = 28, error message = 'No space left on device' ...").
herr_t find_errno(unsigned, const H5E_error2_t* e, void* out) {
  int* err = static_cast<int*>(out);
  if (*err != 0 || e == nullptr || e->desc == nullptr) return 0;
  const char* p = std::strstr(e->desc, "errno = ");
  int v = 0;
  if (p != nullptr && std::sscanf(p, "errno = %d", &v) == 1 && v > 0) *err = v;
  return 0;
}

int last_errno() {
  int err = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_errno, &err);
  return err;
}

// "write failed: No space left on device" (or "... (disk full?)" when HDF5 recorded no errno).
std::string write_failure_reason() {
  const int err = last_errno();
  if (err == 0) return "write failed (disk full?)";
  return std::string("write failed: ") + std::strerror(err);
}

// ": No space left on device" when the failed call recorded an errno, else "".
std::string errno_suffix() {
  const int err = last_errno();
  return err == 0 ? std::string() : std::string(": ") + std::strerror(err);
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

bool Handle::reset() noexcept {
  if (id_ < 0) return true;
  const herr_t rc = H5Idec_ref(id_);
  id_ = H5I_INVALID_HID;
  return rc >= 0;
}

std::int64_t DatasetInfo::elements() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::string DatasetInfo::type_name() const { return type_name_of(type_class, type_size, is_signed); }

void silence_errors() {
  // Per thread: a thread-safe HDF5 keeps one error stack (and its printing) per
  // thread, and braid-generate writes its shards from a worker thread.
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

std::string library_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return fmt::format("{}.{}.{}", maj, min, rel);
}

File File::create(const std::filesystem::path& actual, std::string name) {
  silence_errors();
  // Exactly the 1.8 format: its dense attribute storage holds attributes over 64 KiB (a long
  // config), and capping it there keeps the files readable by HDF5 1.8 (1.10 chunk indexes are not).
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  // The user block that close() fills with the file's seal (h5_guard.hpp).
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_userblock(fcpl.get(), kSealBlock);
  Handle f(H5Fcreate(actual.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!f.valid()) throw InputError(name, "", "cannot create the HDF5 file " + actual.string() + errno_suffix());
  File file(std::move(f), std::move(name));
  file.actual_ = actual;
  return file;
}

// A sealed file whose seal does not match is refused whole; this says which datasets are
// damaged where their checksums can tell (libhdf5 parses it only after the probe read it whole
// in a child), and otherwise repeats the seal's complaint (damage in the file's metadata).
[[noreturn]] void File::name_damaged_datasets(const std::filesystem::path& path, const std::string& name,
                                              const InputError& broken) {
  probe_unsealed(path, name);
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw broken;
  const File file(std::move(f), name);
  ChecksumReport report;
  try {
    report = file.verify_checksums();
  } catch (const InputError&) {
    throw broken;
  }
  if (report.mismatched.empty()) throw broken;
  throw InputError(name, report.mismatched);
}

File File::open_read(const std::filesystem::path& path) {
  silence_errors();
  const std::string name = path.string();
  require_regular_file(name);  // a FIFO would block the open, /dev/zero never end the probe's read
  // libhdf5 parses only what braid vouches for: a sealed file whose seal matches, or an
  // unsealed one that a child process has read whole without crashing (h5_guard.hpp).
  if (const auto seal = read_seal(path, name)) {
    try {
      verify_seal(path, name, *seal);
    } catch (const InputError& broken) {
      name_damaged_datasets(path, name, broken);
    }
  } else {
    const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
    if (is_hdf5 == 0) throw InputError(name, "", "not an HDF5 file");
    if (is_hdf5 < 0) throw InputError(name, "", "cannot be read (permissions?)");
    probe_unsealed(path, name);
  }
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    throw InputError(name, "", "damaged or truncated HDF5 file (HDF5 cannot open it)");
  }
  return File(std::move(f), name);
}

bool File::has_attr(const std::string& attr) const { return H5Aexists(id(), attr.c_str()) > 0; }

// A scalar string attribute of any object (root group, dataset).
std::optional<std::string> read_string_attr(hid_t obj, const std::string& attr, const std::string& file,
                                            const std::string& field) {
  if (H5Aexists(obj, attr.c_str()) <= 0) return std::nullopt;
  Handle a(H5Aopen(obj, attr.c_str(), H5P_DEFAULT));
  Handle t(H5Aget_type(a.get()));
  if (!a.valid() || !t.valid()) throw InputError(file, field, "cannot be read");
  if (H5Tget_class(t.get()) != H5T_STRING) throw InputError(file, field, "is not a string");
  Handle space(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) throw InputError(file, field, "is not a single string");
  if (H5Tis_variable_str(t.get()) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(t.get()));
    char* buf = nullptr;
    if (H5Aread(a.get(), mem.get(), &buf) < 0 || buf == nullptr) throw InputError(file, field, "cannot be read");
    std::string s(buf);
    H5free_memory(buf);
    return s;
  }
  const std::size_t size = H5Tget_size(t.get());
  std::string s(size, '\0');
  if (size > 0 && H5Aread(a.get(), t.get(), s.data()) < 0) throw InputError(file, field, "cannot be read");
  // Fixed-length strings are padded with NULs (or spaces, for Fortran-style padding).
  const H5T_str_t pad = H5Tget_strpad(t.get());
  auto end = s.find('\0');
  if (end != std::string::npos) s.resize(end);
  if (pad == H5T_STR_SPACEPAD) s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

namespace {

// Fixed-length UTF-8 string attribute on any object; false when HDF5 fails.
bool write_string_attr(hid_t obj, const std::string& attr, std::string_view value) {
  if (H5Aexists(obj, attr.c_str()) > 0) H5Adelete(obj, attr.c_str());
  Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), value.size() + 1);
  H5Tset_strpad(t.get(), H5T_STR_NULLTERM);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(H5Acreate2(obj, attr.c_str(), t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  std::string buf(value);
  return a.valid() && H5Awrite(a.get(), t.get(), buf.c_str()) >= 0;
}
}  // namespace

std::optional<std::string> File::attr_string(const std::string& attr) const {
  return read_string_attr(id(), attr, name_, "attribute " + attr);
}

std::optional<std::int64_t> File::attr_int(const std::string& attr) const {
  if (!has_attr(attr)) return std::nullopt;
  const std::string field = "attribute " + attr;
  Handle a(H5Aopen(id(), attr.c_str(), H5P_DEFAULT));
  Handle t(H5Aget_type(a.get()));
  if (!a.valid() || !t.valid()) throw InputError(name_, field, "cannot be read");
  if (H5Tget_class(t.get()) != H5T_INTEGER) {
    throw InputError(name_, field,
                     "is " + type_name_of(H5Tget_class(t.get()), H5Tget_size(t.get()), true) +
                         ", expected an integer");
  }
  Handle space(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) throw InputError(name_, field, "is not a single integer");
  std::int64_t v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) throw InputError(name_, field, "cannot be read as a 64-bit integer");
  return v;
}

void File::set_attr(const std::string& attr, std::string_view value) {
  silence_errors();  // this thread may not be the one that opened the file
  if (!write_string_attr(id(), attr, value)) {
    throw InputError(name_, "attribute " + attr, "cannot be written: " + write_failure_reason());
  }
}

void File::set_attr(const std::string& attr, std::int64_t value) {
  silence_errors();  // this thread may not be the one that opened the file
  if (has_attr(attr)) H5Adelete(id(), attr.c_str());
  Handle space(H5Screate(H5S_SCALAR));
  Handle a(H5Acreate2(id(), attr.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid() || H5Awrite(a.get(), H5T_NATIVE_INT64, &value) < 0) {
    throw InputError(name_, "attribute " + attr, "cannot be written: " + write_failure_reason());
  }
}

static_assert(std::endian::native == std::endian::little,
              "checksums hash the values as they lie in memory, which must be the files' little-endian order");

std::string checksum_of(const void* data, std::size_t bytes) {
  return fmt::format("{}:{:016x}", kChecksumAlgorithm, XXH3_64bits(data, bytes));
}

void File::store_checksum(hid_t d, const std::string& path, const void* data, std::size_t bytes) {
  if (!write_string_attr(d, kChecksumAttr, checksum_of(data, bytes))) {
    throw InputError(name_, display(path), "cannot write its checksum: " + write_failure_reason());
  }
}

std::optional<std::string> File::stored_checksum(hid_t d, const std::string& path) const {
  auto c = read_string_attr(d, kChecksumAttr, name_, display(path) + " attribute " + kChecksumAttr);
  if (c && c->rfind(std::string(kChecksumAlgorithm) + ":", 0) != 0) {
    throw InputError(name_, display(path) + " attribute " + kChecksumAttr,
                     "is \"" + *c + "\", not a " + kChecksumAlgorithm + " checksum this braid knows");
  }
  return c;
}

std::string File::compute_checksum(hid_t d, const std::string& path) const {
  Handle t(H5Dget_type(d));
  Handle native(H5Tget_native_type(t.get(), H5T_DIR_ASCEND));
  Handle space(H5Dget_space(d));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (!t.valid() || !native.valid() || n < 0 || rank < 0) throw InputError(name_, display(path), "cannot be read (damaged?)");
  std::vector<hsize_t> extent(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), extent.data(), nullptr);
  // An extent the file cannot hold is refused before the buffer for it is allocated.
  expect_plausible_extent(d, path, std::vector<std::int64_t>(extent.begin(), extent.end()), H5Tget_size(native.get()));
  const std::size_t bytes = static_cast<std::size_t>(n) * H5Tget_size(native.get());
  // Not value-initialised: a 1 GB tensor would be written twice.
  std::unique_ptr<std::byte[]> buf(new std::byte[std::max<std::size_t>(bytes, 1)]);
  if (bytes > 0 && H5Dread(d, native.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.get()) < 0) {
    throw InputError(name_, display(path), "cannot be read (damaged data?)");
  }
  return checksum_of(buf.get(), bytes);
}

void File::expect_checksum(const std::string& path, const std::optional<std::string>& stored,
                           const std::string& actual) const {
  if (stored && *stored != actual) {
    throw InputError(name_, display(path),
                     fmt::format("checksum mismatch: the file is damaged (stored {}, the data hashes to {})", *stored,
                                 actual));
  }
}

bool File::has_dataset(const std::string& path) const {
  // Walk the path one link at a time: H5Lexists fails on a missing intermediate group.
  std::string prefix;
  std::size_t start = 0;
  while (true) {
    const auto slash = path.find('/', start);
    prefix = path.substr(0, slash);
    if (H5Lexists(id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  H5O_info_t info;
  if (H5Oget_info_by_name(id(), path.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

DatasetInfo File::dataset_info(const std::string& path) const {
  if (!has_dataset(path)) throw InputError(name_, display(path), "missing");
  Handle d(H5Dopen2(id(), path.c_str(), H5P_DEFAULT));
  Handle t(H5Dget_type(d.get()));
  Handle space(H5Dget_space(d.get()));
  if (!d.valid() || !t.valid() || !space.valid()) throw InputError(name_, display(path), "cannot be opened");
  DatasetInfo info;
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw InputError(name_, display(path), "has an unreadable shape");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  for (auto v : dims) info.dims.push_back(static_cast<std::int64_t>(v));
  info.type_class = H5Tget_class(t.get());
  info.type_size = H5Tget_size(t.get());
  info.is_signed = info.type_class != H5T_INTEGER || H5Tget_sign(t.get()) != H5T_SGN_NONE;
  expect_plausible_extent(d.get(), path, info.dims, info.type_size);
  return info;
}

// A damaged header can declare any extent (2^48 elements); reading it would allocate that
// much before HDF5 notices the data is not there. Every value braid reads is stored in the
// file, so the declared bytes must fit in it (fits_in_file).
void File::expect_plausible_extent(hid_t d, const std::string& path, const std::vector<std::int64_t>& dims,
                                   std::size_t type_size) const {
  std::uint64_t elements = 1;
  bool overflow = false;
  for (auto v : dims) overflow = overflow || v < 0 || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(v), &elements);
  hsize_t file_bytes = 0;
  if (H5Fget_filesize(id(), &file_bytes) < 0) throw InputError(name_, display(path), "cannot be read (damaged file?)");
  Handle dcpl(H5Dget_create_plist(d));
  const bool filtered = dcpl.valid() && H5Pget_nfilters(dcpl.get()) > 0;
  std::uint64_t bytes = 0;
  if (overflow || !fits_in_file(elements, type_size, file_bytes, filtered, &bytes)) {
    std::string shape;
    for (auto v : dims) shape += (shape.empty() ? "" : " x ") + std::to_string(v);
    throw InputError(name_, display(path),
                     fmt::format("declares {} values of {} bytes ({}), more than the {}-byte file can hold "
                                 "(damaged file?)",
                                 shape.empty() ? "1" : shape, type_size,
                                 overflow || bytes == 0 ? "beyond 2^64 bytes" : fmt::format("{} bytes", bytes),
                                 file_bytes));
  }
}

namespace {
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> File::dataset_paths() const {
  std::vector<std::string> out;
  if (H5Ovisit(id(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &out) < 0) {
    throw InputError(name_, "", "cannot list the datasets (damaged file?)");
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
Handle intermediate_groups() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}
}  // namespace

template <typename T>
void File::write_1d(const std::string& path, std::span<const T> data, Storage storage) {
  silence_errors();  // this thread may not be the one that opened the file
  const hsize_t n = data.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  // An empty dataset cannot be chunked; it stays contiguous (and empty).
  if (storage == Storage::compressed && n > 0) {
    const hsize_t chunk = std::min(n, kChunkElements);
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    if (sizeof(T) > 1) H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), kDeflateLevel);
  }
  Handle lcpl = intermediate_groups();
  Handle d(H5Dcreate2(id(), path.c_str(), TypeOf<T>::file(), space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  if (!d.valid()) throw InputError(name_, display(path), "cannot create the dataset" + errno_suffix());
  if (n > 0 && H5Dwrite(d.get(), TypeOf<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0) {
    throw InputError(name_, display(path), write_failure_reason());
  }
  store_checksum(d.get(), path, data.data(), data.size_bytes());
}

void File::write_tensor(const std::string& path, const std::vector<std::int64_t>& dims, const float* data) {
  silence_errors();  // this thread may not be the one that opened the file
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr));
  Handle lcpl = intermediate_groups();
  Handle d(H5Dcreate2(id(), path.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!d.valid()) throw InputError(name_, display(path), "cannot create the dataset" + errno_suffix());
  std::int64_t n = 1;
  for (auto v : dims) n *= v;
  if (n > 0 && H5Dwrite(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    throw InputError(name_, display(path), write_failure_reason());
  }
  store_checksum(d.get(), path, data, static_cast<std::size_t>(n) * sizeof(float));
}

template <typename T>
void File::read(const std::string& path, T* dst, std::size_t count) const {
  const DatasetInfo info = dataset_info(path);
  if (!converts_losslessly<T>(info)) {
    throw InputError(name_, display(path),
                     fmt::format("is stored as {}, expected {}", info.type_name(),
                                 type_name_of(TypeOf<T>::cls, sizeof(T), TypeOf<T>::is_signed)));
  }
  if (static_cast<std::size_t>(info.elements()) != count) {
    throw InputError(name_, display(path),
                     fmt::format("has {} elements, expected {}", info.elements(), count));
  }
  Handle d(H5Dopen2(id(), path.c_str(), H5P_DEFAULT));
  const auto stored = stored_checksum(d.get(), path);
  if (count > 0 && H5Dread(d.get(), TypeOf<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0) {
    throw InputError(name_, display(path), "cannot be read (damaged data?)");
  }
  if (!stored) return;
  // Stored as T: the values just read are the stored bytes. Otherwise (a widening
  // read), hash them again in the stored type.
  const bool same = info.type_class == TypeOf<T>::cls && info.type_size == sizeof(T);
  expect_checksum(path, stored, same ? checksum_of(dst, count * sizeof(T)) : compute_checksum(d.get(), path));
}

template <typename T>
std::int64_t File::length_1d(const std::string& path) const {
  const DatasetInfo info = dataset_info(path);
  if (info.dims.size() != 1) {
    throw InputError(name_, display(path), fmt::format("has {} dimensions, expected 1", info.dims.size()));
  }
  if (!converts_losslessly<T>(info)) {
    throw InputError(name_, display(path),
                     fmt::format("is stored as {}, expected {}", info.type_name(),
                                 type_name_of(TypeOf<T>::cls, sizeof(T), TypeOf<T>::is_signed)));
  }
  return info.dims[0];
}

template <typename T>
std::vector<T> File::read_1d(const std::string& path) const {
  std::vector<T> out(static_cast<std::size_t>(length_1d<T>(path)));
  read<T>(path, out.data(), out.size());
  return out;
}

void File::read_box(const std::string& path, const std::vector<std::int64_t>& start,
                    const std::vector<std::int64_t>& count, float* dst) const {
  const DatasetInfo info = dataset_info(path);
  if (!converts_losslessly<float>(info)) {
    throw InputError(name_, display(path), "is stored as " + info.type_name() + ", expected float32");
  }
  if (start.size() != info.dims.size() || count.size() != info.dims.size()) {
    throw std::invalid_argument(fmt::format("{}: a box of rank {} in a dataset of rank {}", path, start.size(),
                                            info.dims.size()));
  }
  std::int64_t n = 1;
  for (std::size_t i = 0; i < start.size(); ++i) {
    if (start[i] < 0 || count[i] < 0 || start[i] + count[i] > info.dims[i]) {
      throw std::invalid_argument(fmt::format("{}: box [{}, {}) outside dimension {} of size {}", path, start[i],
                                              start[i] + count[i], i, info.dims[i]));
    }
    n *= count[i];
  }
  Handle d(H5Dopen2(id(), path.c_str(), H5P_DEFAULT));
  // A checksum covers the whole dataset: a slice read hashes all of it first.
  if (const auto stored = stored_checksum(d.get(), path)) expect_checksum(path, stored, compute_checksum(d.get(), path));
  if (n == 0) return;
  Handle file_space(H5Dget_space(d.get()));
  const std::vector<hsize_t> hs(start.begin(), start.end()), hc(count.begin(), count.end());
  Handle mem_space(hc.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(hc.size()), hc.data(), nullptr));
  if (!hc.empty() && H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, hs.data(), nullptr, hc.data(), nullptr) < 0) {
    throw InputError(name_, display(path), "cannot select the slice");
  }
  if (H5Dread(d.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT, dst) < 0) {
    throw InputError(name_, display(path), "cannot be read (damaged data?)");
  }
}

ChecksumReport File::verify_checksums() const {
  ChecksumReport r;
  for (const auto& path : dataset_paths()) {
    try {
      Handle d(H5Dopen2(id(), path.c_str(), H5P_DEFAULT));
      if (!d.valid()) throw InputError(name_, display(path), "cannot be opened");
      const auto stored = stored_checksum(d.get(), path);
      if (!stored) {
        r.absent.push_back(path);
        continue;
      }
      expect_checksum(path, stored, compute_checksum(d.get(), path));
      r.verified.push_back(path);
    } catch (const InputError& e) {
      r.mismatched.push_back(e.field() + ": " + (e.problems().empty() ? std::string(e.what()) : e.problems().front()));
    }
  }
  return r;
}

void File::close() {
  silence_errors();  // this thread may not be the one that opened the file
  if (!file_.valid()) return;
  // The seal hashes the bytes on disk, so the file must really be closed here, not kept open
  // by a dataset or attribute handle still alive (which would let HDF5 write after the seal).
  if (!actual_.empty() && H5Fget_obj_count(file_.get(), H5F_OBJ_ALL) != 1) {
    throw std::logic_error(name_ + ": closed with HDF5 objects still open");
  }
  if (H5Fflush(file_.get(), H5F_SCOPE_LOCAL) < 0 || !file_.reset()) {
    throw InputError(name_, "", "cannot finish writing the HDF5 file: " + write_failure_reason());
  }
  if (!actual_.empty()) write_seal(actual_, name_);
}

#define BRAID_H5_INSTANTIATE(T)                                                        \
  template void File::write_1d<T>(const std::string&, std::span<const T>, Storage);    \
  template void File::read<T>(const std::string&, T*, std::size_t) const;              \
  template std::vector<T> File::read_1d<T>(const std::string&) const;      \
  template std::int64_t File::length_1d<T>(const std::string&) const;
BRAID_H5_INSTANTIATE(std::int32_t)
BRAID_H5_INSTANTIATE(std::int64_t)
BRAID_H5_INSTANTIATE(std::uint8_t)
BRAID_H5_INSTANTIATE(float)
BRAID_H5_INSTANTIATE(double)
#undef BRAID_H5_INSTANTIATE

}  // namespace braid::io::h5
