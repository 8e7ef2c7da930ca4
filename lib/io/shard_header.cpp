#include "io/shard_header.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace braid::io {

std::string read_format_name(const h5::File& f) {
  auto name = f.attr_string(kAttrFormat);
  if (!name) {
    throw InputError(f.name(), "attribute format", "missing: this HDF5 file is not a braid file");
  }
  return *name;
}

int check_header(const h5::File& f, const std::string& expected_format, int max_version) {
  const std::string name = read_format_name(f);
  if (name != expected_format) {
    throw InputError(f.name(), "attribute format", fmt::format("is \"{}\", expected \"{}\"", name, expected_format));
  }
  auto version = f.attr_int(kAttrVersion);
  if (!version) throw InputError(f.name(), "attribute version", "missing");
  if (*version < 1 || *version > max_version) {
    throw InputError(f.name(), "attribute version",
                     fmt::format("is {}, this braid reads {} versions 1 to {}", *version, expected_format,
                                 max_version));
  }
  auto complete = f.attr_int(kAttrComplete);
  if (!complete || *complete != 1) {
    throw InputError(f.name(), "attribute complete",
                     complete ? fmt::format("is {}, expected 1: the file is unfinished", *complete)
                              : std::string("missing: the file is unfinished (its writer did not finish)"));
  }
  return static_cast<int>(*version);
}

void write_header(h5::File& f, const std::string& format, int version) {
  f.set_attr(kAttrFormat, format);
  f.set_attr(kAttrVersion, std::int64_t{version});
}

void mark_complete(h5::File& f) { f.set_attr(kAttrComplete, std::int64_t{1}); }

}  // namespace braid::io
