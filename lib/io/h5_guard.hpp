// Guards in front of libhdf5 for files from outside.
//
// libhdf5 (Debian's 1.10) trusts a file's structure: fuzzing found heap overflows, 2^62-byte
// allocations and endless loops in it on damaged files (docs/reliability.md). braid therefore
// never lets libhdf5 parse bytes it has not vouched for:
//
// * The seal. Every HDF5 file braid writes starts with a 512-byte user block (HDF5 skips it;
//   h5py, h5dump and h5ls read such files as they are) holding one line,
//       "BRAID-SEAL 1 xxh3-64:<16 hex digits> bytes:<n>\n" padded with NULs,
//   the XXH3-64 of the n bytes after the user block. A sealed file is verified before libhdf5
//   opens it (a streaming hash at several GB/s); any change to it is refused.
// * The probe. A file without a seal (written by h5py or by a braid before seals) is read whole
//   by libhdf5 in a forked child first: every object, attribute and dataset. A child that dies
//   by a signal (or a sanitizer report), or runs past its time, proves the file damaged, and it
//   is refused with exit 2 before the process that would have crashed reads it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace braid::io::h5 {

// Whether `elements` values of `type_size` bytes can be stored in a file of `file_bytes`:
// as they are for unfiltered data, deflated by at most zlib's ratio (about 1032:1, here
// 1100) for filtered data. Sets *bytes to their size (0 when it overflows 64 bits).
bool fits_in_file(std::uint64_t elements, std::size_t type_size, std::uint64_t file_bytes, bool filtered,
                  std::uint64_t* bytes = nullptr);

// The size of the user block braid reserves for its seal.
inline constexpr std::uint64_t kSealBlock = 512;

// What the first bytes of a file say about its seal.
struct Seal {
  std::string checksum;  // "xxh3-64:<hex>"
  std::uint64_t bytes = 0;
};

// Writes the seal of a closed HDF5 file created with a kSealBlock user block.
// InputError naming `name` when the file cannot be read back or written.
void write_seal(const std::filesystem::path& actual, const std::string& name);

// The seal at the start of the file, nullopt when it has none. InputError (naming `name`)
// when the user block says BRAID-SEAL but cannot be parsed.
std::optional<Seal> read_seal(const std::filesystem::path& path, const std::string& name);

// Hashes the file's contents after the user block and compares them with the seal:
// InputError naming `name` on a mismatch or a length that differs.
void verify_seal(const std::filesystem::path& path, const std::string& name, const Seal& seal);

// XXH3-64 of the file's bytes from `offset` to its end, as "xxh3-64:<16 hex digits>".
// InputError naming `name` when it cannot be read.
std::string hash_file(const std::filesystem::path& path, std::uint64_t offset, const std::string& name);

// Reads the whole unsealed file through libhdf5 in a forked child (see above). Returns when
// the child finished (HDF5 errors included: the caller's own reading reports them); throws
// InputError naming `name` when the child crashed or ran past its time. The time allowed is
// 10 s plus 1 s per 100 MB of file, or BRAID_H5_PROBE_TIMEOUT seconds when that is set.
void probe_unsealed(const std::filesystem::path& path, const std::string& name);

}  // namespace braid::io::h5
