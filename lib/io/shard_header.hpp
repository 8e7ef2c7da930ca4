// The root attributes every braid HDF5 file shares: the format name and
// version, and the completeness sentinel written last. Reading them first lets
// any reader refuse a wrong, newer or unfinished file with one clear message.
#pragma once

#include <string>

#include "io/h5.hpp"

namespace braid::io {

inline constexpr const char* kAttrFormat = "format";
inline constexpr const char* kAttrVersion = "version";
inline constexpr const char* kAttrComplete = "complete";

// The "format" attribute, or InputError naming the file when it is missing.
std::string read_format_name(const h5::File& f);

// Checks format == expected, 1 <= version <= max_version and complete == 1;
// returns the version. Throws InputError naming the file and the attribute.
int check_header(const h5::File& f, const std::string& expected_format, int max_version);

// Writes format and version (at creation) ...
void write_header(h5::File& f, const std::string& format, int version);
// ... and the sentinel (last, just before closing).
void mark_complete(h5::File& f);

}  // namespace braid::io
