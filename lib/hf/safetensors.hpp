// safetensors files (the format of Hugging Face checkpoints): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian tensor bytes, offsets counted from the end of the header.
//
// Reading converts F32, F16, BF16 and F64 to float32; other dtypes are listed
// but refused when read. Writing stores F32 or BF16.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace braid::hf {

using Shape = std::vector<std::int64_t>;

struct TensorInfo {
  std::string dtype;             // "F32", "BF16", ...
  Shape shape;
  std::uint64_t begin = 0;       // byte offsets in the data section
  std::uint64_t end = 0;
};

// Opens a file and validates the whole header (every offset within the file,
// sizes matching shape × dtype, no overlaps): problems are InputErrors naming
// the file and the tensor.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return tensors_.contains(name); }
  const TensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor as float32, numel(shape) values, into dst.
  void read(const std::string& name, float* dst) const;
  std::vector<float> read(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t data_start_ = 0;
  mutable std::ifstream in_;
};

enum class StoreDtype { f32, bf16 };

// Writes a file atomically (core/files.hpp AtomicFile). Tensors are declared
// first and their data asked for at commit(), one tensor at a time, so a
// checkpoint larger than memory can be streamed from another file.
class SafetensorsWriter {
 public:
  using Fill = std::function<void(float* dst)>;  // writes numel(shape) floats

  explicit SafetensorsWriter(std::filesystem::path path, StoreDtype dtype = StoreDtype::f32);

  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // Data is copied from `data` at commit(): it must stay valid until then.
  void add(const std::string& name, const Shape& shape, const float* data);
  void add(const std::string& name, const Shape& shape, Fill fill);
  // Bytes the file will have (header included).
  std::uint64_t planned_bytes() const;
  void commit();

 private:
  struct Entry { std::string name; Shape shape; Fill fill; };
  std::string header_json() const;

  std::filesystem::path path_;
  StoreDtype dtype_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

std::int64_t numel(const Shape& shape);
// Bytes per element of a safetensors dtype name; 0 if unknown.
int dtype_size(const std::string& dtype);

}  // namespace braid::hf
