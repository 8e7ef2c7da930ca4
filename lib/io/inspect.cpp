#include "io/inspect.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "io/deferred_file.hpp"
#include "io/h5.hpp"
#include "io/inspect_kinds.hpp"
#include "io/sample_shard.hpp"
#include "io/shard_header.hpp"
#include "io/weight_shard.hpp"

namespace braid::io {
namespace {

bool is_hdf5(const std::string& path) {
  if (is_std_stream(path)) return false;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path, "", "no such file");
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "", "is a folder, not a file");
  // A device or FIFO is no HDF5 file; the text reader refuses or times it out.
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  h5::silence_errors();
  return H5Fis_hdf5(path.c_str()) > 0;
}

// The braid JSON formats and the newest version of each this braid reads (the
// readers' own constants live in lib/sched, lib/plan, lib/driver, which io does not
// depend on; docs/tools/braid.md lists them). braid.eval: lib/eval; braid.report and
// braid.ablation: lib/driver/report; braid.prediction: lib/driver/prediction.
struct JsonFormat {
  const char* name;
  int version;
};
constexpr JsonFormat kJsonFormats[] = {
    {"braid.schedspec", 1}, {"braid.schedule", 1}, {"braid.plan", 1},  {"braid.experiment", 1},
    {"braid.cluster", 1},   {"braid.profile", 1},  {"braid.probe", 1}, {"braid.comm", 1},
    {"braid.run", 1},       {"braid.stagestats", 1}, {"braid.eval", 1}, {"braid.report", 1},
    {"braid.ablation", 1},  {"braid.prediction", 1},
};

// A braid JSON file: an object with a known braid "format" and a version this braid reads.
json load_braid_json(const std::string& path) {
  const std::string text = read_text_file(path);
  const std::string name = is_std_stream(path) ? "<stdin>" : path;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') {
    throw InputError(name, "", "not a braid file: neither HDF5 nor a JSON object");
  }
  json doc = parse_json_text(text, name);
  Checker c(name);
  const auto format = c.string(doc, "", "format");
  const auto version = c.integer(doc, "", "version", {.min = 1});
  if (format) {
    const JsonFormat* known = nullptr;
    for (const auto& f : kJsonFormats) {
      if (*format == f.name) known = &f;
    }
    if (known == nullptr) {
      std::string names;
      for (const auto& f : kJsonFormats) names += (names.empty() ? "" : ", ") + std::string(f.name);
      c.fail("format", fmt::format("is \"{}\", not a braid JSON format ({})", *format, names));
    } else if (version && *version > known->version) {
      c.fail("version", fmt::format("is {}, this braid reads {} up to version {}", *version, known->name,
                                    known->version));
    }
  }
  c.check();
  return doc;
}

std::string hdf5_format(const std::string& path) {
  const auto f = h5::File::open_read(path);
  return read_format_name(f);
}

[[noreturn]] void unknown_format(const std::string& path, const std::string& format) {
  throw InputError(path, "attribute format",
                   fmt::format("\"{}\" is not a format this braid reads ({}, {}, {})", format, kSamplesFormat,
                               kWeightsFormat, kDeferredFormat));
}

}  // namespace

ordered_json inspect_file(const std::string& path, const InspectOptions& options) {
  if (!is_hdf5(path)) return detail::summarize_json(is_std_stream(path) ? "-" : path, load_braid_json(path));
  const std::string format = hdf5_format(path);
  if (format == kSamplesFormat) return detail::summarize_samples(path, options);
  if (format == kWeightsFormat) return detail::summarize_weights(path);
  if (format == kDeferredFormat) return detail::summarize_deferred(path);
  unknown_format(path, format);
}

bool is_weight_shard(const std::string& path) { return is_hdf5(path) && hdf5_format(path) == kWeightsFormat; }

namespace {
// Every dataset compared with its checksum: all mismatches in one InputError.
void check_checksums(const std::string& path, std::vector<std::string>* notes) {
  const auto f = h5::File::open_read(path);
  const h5::ChecksumReport r = f.verify_checksums();
  if (!r.mismatched.empty()) throw InputError(path, r.mismatched);
  if (notes && !r.absent.empty()) {
    notes->push_back(fmt::format("{}: note: {} of {} datasets carry no checksum (written before braid checksummed "
                                 "datasets?), not verified: /{}{}",
                                 path, r.absent.size(), r.absent.size() + r.verified.size(), r.absent.front(),
                                 r.absent.size() > 1 ? ", ..." : ""));
  }
}
}  // namespace

std::optional<std::string> check_file(const std::string& path, std::vector<std::string>* notes) {
  try {
    if (!is_hdf5(path)) {
      load_braid_json(path);
      return std::nullopt;
    }
    const std::string format = hdf5_format(path);
    if (format != kSamplesFormat && format != kWeightsFormat && format != kDeferredFormat) unknown_format(path, format);
    const bool samples = format == kSamplesFormat;
    const bool deferred = format == kDeferredFormat;
    // The header, then every checksum (so that all damaged datasets are listed), then every
    // value: a NaN or Inf is a problem too (io/finite.hpp).
    check_header(h5::File::open_read(path), format,
                 samples ? kSamplesVersion : deferred ? kDeferredVersion : kWeightsVersion);
    std::vector<std::string> found;
    check_checksums(path, &found);
    if (samples) {
      read_sample_shard(path);
    } else if (deferred) {
      read_deferred_file(path);
    } else {
      WeightShardReader r(path);
      std::vector<float> values;
      for (const auto& name : r.names()) {
        values.resize(static_cast<std::size_t>(numel(r.shape(name))));
        r.read(name, values.data());  // refuses a non-finite tensor, naming it
      }
    }
    if (notes) notes->insert(notes->end(), found.begin(), found.end());
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}

}  // namespace braid::io
