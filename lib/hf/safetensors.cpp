#include "hf/safetensors.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "hf/half.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace braid::hf {

namespace {
// The Rust reference refuses headers over 100 MB; so does braid (a corrupt length
// would otherwise make it try to allocate terabytes).
constexpr std::uint64_t kMaxHeader = 100'000'000;
}  // namespace

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

int dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

SafetensorsReader::SafetensorsReader(std::filesystem::path path) : path_(std::move(path)) {
  const std::string file = path_.string();
  require_regular_file(file);
  in_.open(path_, std::ios::binary);
  if (!in_) throw InputError(file, "", "cannot open the file");
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path_, ec);
  std::uint64_t header_len = 0;
  if (ec || size < 8 || !in_.read(reinterpret_cast<char*>(&header_len), 8)) {
    throw InputError(file, "header", "the file is shorter than the 8-byte header length");
  }
  if (header_len > kMaxHeader || 8 + header_len > size) {
    throw InputError(file, "header", fmt::format("header length {} does not fit in a file of {} bytes", header_len, size));
  }
  std::string header(header_len, '\0');
  in_.read(header.data(), static_cast<std::streamsize>(header_len));
  data_start_ = 8 + header_len;
  const std::uint64_t data_size = size - data_start_;

  const json doc = parse_json_text(header, file);
  if (!doc.is_object()) throw InputError(file, "header", "must be a JSON object");
  Checker c(file);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (auto& [name, t] : doc.items()) {
    if (name == "__metadata__") {
      if (!t.is_object()) { c.fail(name, "must be an object of strings"); continue; }
      for (auto& [k, v] : t.items()) {
        if (v.is_string()) metadata_[k] = v.get<std::string>();
        else c.fail("__metadata__." + k, "must be a string");
      }
      continue;
    }
    const std::string where = fmt::format("\"{}\"", name);
    if (!t.is_object()) { c.fail(where, "must be an object with dtype, shape, data_offsets"); continue; }
    TensorInfo info;
    const auto dtype = c.string(t, where, "dtype", {}, "");  // a wrong type is a problem, not a type_error
    if (!dtype) continue;
    info.dtype = *dtype;
    const int elem = dtype_size(info.dtype);
    if (elem == 0) { c.fail(where + ".dtype", fmt::format("unknown dtype \"{}\"", info.dtype)); continue; }
    const json shape = t.value("shape", json());
    const json offs = t.value("data_offsets", json());
    bool ok = shape.is_array() && offs.is_array() && offs.size() == 2 && offs[0].is_number_unsigned() &&
              offs[1].is_number_unsigned();
    for (const json& d : shape.is_array() ? shape : json::array()) {
      if (!d.is_number_unsigned()) ok = false;
      else info.shape.push_back(d.get<std::int64_t>());
    }
    if (!ok) { c.fail(where, "needs a shape of non-negative integers and data_offsets [begin, end]"); continue; }
    info.begin = offs[0].get<std::uint64_t>();
    info.end = offs[1].get<std::uint64_t>();
    const auto want = static_cast<std::uint64_t>(numel(info.shape)) * static_cast<std::uint64_t>(elem);
    if (info.end < info.begin || info.end - info.begin != want) {
      c.fail(where + ".data_offsets", fmt::format("span [{}, {}) is not the {} bytes of shape {} {}",
                                                  info.begin, info.end, want, shape.dump(), info.dtype));
      continue;
    }
    if (info.end > data_size) {
      c.fail(where + ".data_offsets", fmt::format("end {} lies past the data section ({} bytes): truncated file?",
                                                  info.end, data_size));
      continue;
    }
    if (info.end > info.begin) spans.emplace_back(info.begin, info.end);
    tensors_.emplace(name, std::move(info));
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      c.fail("header", fmt::format("tensor data overlaps at byte {}", spans[i].first));
      break;
    }
  }
  c.check();
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : tensors_) out.push_back(n);
  return out;
}

const TensorInfo& SafetensorsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw InputError(path_.string(), name, "no such tensor in the file");
  return it->second;
}

void SafetensorsReader::read(const std::string& name, float* dst) const {
  const TensorInfo& t = info(name);
  const std::size_t n = static_cast<std::size_t>(numel(t.shape));
  std::vector<char> raw(t.end - t.begin);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(data_start_ + t.begin));
  if (!in_.read(raw.data(), static_cast<std::streamsize>(raw.size()))) {
    throw InputError(path_.string(), name, "could not read the tensor's bytes");
  }
  if (t.dtype == "F32") {
    if (n > 0) std::memcpy(dst, raw.data(), n * 4);  // an empty tensor's dst and data may be null
  } else if (t.dtype == "F64") {
    for (std::size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, raw.data() + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    const bool bf = t.dtype == "BF16";
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      dst[i] = bf ? bf16_to_float(h) : f16_to_float(h);
    }
  } else {
    throw InputError(path_.string(), name + ".dtype",
                     fmt::format("dtype {} cannot be read as weights (F32, F16, BF16, F64 can)", t.dtype));
  }
}

std::vector<float> SafetensorsReader::read(const std::string& name) const {
  std::vector<float> out(static_cast<std::size_t>(numel(info(name).shape)));
  read(name, out.data());
  return out;
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, StoreDtype dtype)
    : path_(std::move(path)), dtype_(dtype) {}

void SafetensorsWriter::add(const std::string& name, const Shape& shape, const float* data) {
  const auto n = static_cast<std::size_t>(numel(shape));
  add(name, shape, [data, n](float* dst) { std::memcpy(dst, data, n * sizeof(float)); });
}

void SafetensorsWriter::add(const std::string& name, const Shape& shape, Fill fill) {
  if (name.empty() || name == "__metadata__") throw std::invalid_argument("safetensors: bad tensor name \"" + name + "\"");
  for (const Entry& e : entries_) {
    if (e.name == name) throw std::invalid_argument("safetensors: tensor \"" + name + "\" added twice");
  }
  entries_.push_back({name, shape, std::move(fill)});
}

std::string SafetensorsWriter::header_json() const {
  ordered_json h = ordered_json::object();
  if (!metadata_.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h["__metadata__"] = m;
  }
  const std::uint64_t elem = dtype_ == StoreDtype::f32 ? 4 : 2;
  std::uint64_t offset = 0;
  for (const Entry& e : entries_) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel(e.shape)) * elem;
    h[e.name] = {{"dtype", dtype_ == StoreDtype::f32 ? "F32" : "BF16"},
                 {"shape", e.shape},
                 {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = h.dump();
  // Spaces up to a multiple of 8, as the reference writer pads, so data stays aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::uint64_t SafetensorsWriter::planned_bytes() const {
  std::uint64_t bytes = 8 + header_json().size();
  for (const Entry& e : entries_) bytes += static_cast<std::uint64_t>(numel(e.shape)) * (dtype_ == StoreDtype::f32 ? 4 : 2);
  return bytes;
}

void SafetensorsWriter::commit() {
  AtomicFile file(path_);
  std::ofstream out(file.temp_path(), std::ios::binary);
  const std::string header = header_json();
  const std::uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<float> buf;
  std::vector<std::uint16_t> half;
  for (const Entry& e : entries_) {
    buf.resize(static_cast<std::size_t>(numel(e.shape)));
    e.fill(buf.data());
    if (dtype_ == StoreDtype::f32) {
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 4));
    } else {
      half.resize(buf.size());
      std::transform(buf.begin(), buf.end(), half.begin(), float_to_bf16);
      out.write(reinterpret_cast<const char*>(half.data()), static_cast<std::streamsize>(half.size() * 2));
    }
  }
  out.close();
  if (!out) {
    const int err = errno;  // what the failed write or close left (ENOSPC on a full disk)
    throw InputError(path_.string(), "", err != 0 ? std::string("write failed: ") + std::strerror(err)
                                                  : std::string("write failed (disk full?)"));
  }
  file.commit();
}

}  // namespace braid::hf
