// Weight shards: model tensors in one HDF5 file (format "braid.weights",
// version 1), stored under their Hugging Face names as float32 datasets whose
// shape is the tensor's shape. A checkpoint is one or more shards: pipeline
// stages write the decoder layers [layer_begin, layer_end) they hold (the first
// stage also the embedding, the last the final norm and head), and a reader
// with a different stage count finds each tensor through WeightShardSet.
//
//   WeightShardMeta meta;  meta.model_config = config_json_text; meta.layer_end = 32; ...
//   WeightShardWriter w("step-100.stage0.h5", meta);
//   w.add("model.embed_tokens.weight", {vocab, hidden}, embed.data());
//   w.commit();                                   // now, and only now, the file exists
//
//   WeightShardSet ckpt({"step-100.stage0.h5", "step-100.stage1.h5"});
//   ckpt.read("model.layers.17.mlp.up_proj.weight", dst);   // whichever file holds it
//
// Optimizer state goes to a separate file of the same format with
// kind = "optimizer": tensors "<name>.exp_avg" and "<name>.exp_avg_sq"
// (optimizer_tensor_name) and the optimizer's step in meta.step.
// Every tensor carries a checksum (h5.hpp), written by add() and verified by
// every read and read_slice; a damaged tensor is an InputError naming the file
// and the tensor. Shards written before checksums read unverified.
// The layout on disk is documented in docs/formats.md. HDF5 (Debian's build)
// is not thread-safe: read and write shards from one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::io {

inline constexpr const char* kWeightsFormat = "braid.weights";
inline constexpr int kWeightsVersion = 1;

using Shape = std::vector<std::int64_t>;

// Product of the dimensions (1 for a scalar shape {}).
std::int64_t numel(const Shape& shape);
// "[4096, 11008]"
std::string shape_string(const Shape& shape);

// The largest step a weight shard holds: 2^53 - 1, exact as a JSON number (metrics, stats) and
// far from int64's end, so that counting one more step never wraps. Read and write refuse
// more (a file whose step is 2^63 - 1 trained into a negative step).
inline constexpr std::int64_t kMaxStep = (std::int64_t{1} << 53) - 1;

struct WeightShardMeta {
  std::string kind = "weights";   // "weights", "optimizer" or "adapters" (LoRA, checkpoint/adapters.hpp)
  std::string model_config;       // the Hugging Face config.json, as JSON text ("" = none)
  int layer_begin = 0;            // decoder layers [layer_begin, layer_end) are in this shard
  int layer_end = 0;
  bool has_embedding = false;     // model.embed_tokens.weight is here
  bool has_head = false;          // model.norm.weight and lm_head.weight (or value_head.*) are here
  int tp_rank = 0;                // tensor-parallel slice of this shard
  int tp_size = 1;
  std::int64_t step = 0;          // training step of the weights (optimizer: its step count), in [0, kMaxStep]
  std::string created_by;         // the command line that wrote it
  std::string made_from;          // what made it (io/fingerprint.hpp), JSON text ("" = not recorded)
  std::string adapter_config;     // "adapters": their options and base checkpoint, as JSON text
};

// "<name>.exp_avg", "<name>.exp_avg_sq": the tensors of an optimizer-state file.
std::string optimizer_tensor_name(const std::string& param_name, const std::string& state);

// Writes a shard atomically: tensors go to a temporary file, commit() writes the
// completeness sentinel, closes and renames it onto `path`. Destroyed without
// commit() (an exception, a signal), it leaves nothing under `path`.
class WeightShardWriter {
 public:
  WeightShardWriter(std::filesystem::path path, WeightShardMeta meta);
  ~WeightShardWriter();
  WeightShardWriter(WeightShardWriter&&) noexcept;
  WeightShardWriter& operator=(WeightShardWriter&&) noexcept;

  // Adds one tensor; `data` holds numel(shape) floats in row-major order.
  // Names are unique within a shard and may not contain '/'.
  void add(const std::string& name, const Shape& shape, const float* data);
  void add(const std::string& name, const Shape& shape, std::span<const float> data);
  void commit();

  const std::filesystem::path& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Opens a shard and checks it: format, version, completeness sentinel, the
// metadata attributes, and that every tensor is a float dataset. Any problem is
// an InputError naming the file (and the attribute or tensor).
class WeightShardReader {
 public:
  explicit WeightShardReader(std::filesystem::path path);
  ~WeightShardReader();
  WeightShardReader(WeightShardReader&&) noexcept;
  WeightShardReader& operator=(WeightShardReader&&) noexcept;

  const std::filesystem::path& path() const;
  const WeightShardMeta& meta() const;
  // Tensor names, sorted.
  const std::vector<std::string>& names() const;
  bool contains(const std::string& name) const;
  // InputError naming the file when the tensor is absent.
  Shape shape(const std::string& name) const;
  // Reads the tensor into dst (room for numel(shape(name)) floats).
  void read(const std::string& name, float* dst) const;
  std::vector<float> read(const std::string& name) const;
  // Reads the slice [begin, end) of the tensor along `axis` (the other axes
  // whole), row-major, into dst: a tensor-parallel part of a full tensor
  // (axis 0 for column-parallel q/k/v/gate/up, axis 1 for o_proj/down_proj).
  void read_slice(const std::string& name, int axis, std::int64_t begin, std::int64_t end, float* dst) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Several shards read as one checkpoint: each tensor is looked up in the shard
// that holds it, so a checkpoint written by 4 pipeline stages loads into 1 or 2.
// The shards are those of one tensor-parallel rank; a tensor present in two
// of them is an error (which copy to take would be ambiguous).
class WeightShardSet {
 public:
  explicit WeightShardSet(const std::vector<std::filesystem::path>& paths);

  const std::vector<WeightShardReader>& shards() const { return shards_; }
  // All tensor names over all shards, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // The shard holding `name`; InputError listing the files when none does.
  const WeightShardReader& holder(const std::string& name) const;
  Shape shape(const std::string& name) const { return holder(name).shape(name); }
  void read(const std::string& name, float* dst) const { holder(name).read(name, dst); }
  std::vector<float> read(const std::string& name) const { return holder(name).read(name); }
  // Smallest layer_begin and largest layer_end over the shards.
  int layer_begin() const;
  int layer_end() const;

 private:
  std::vector<WeightShardReader> shards_;
  std::map<std::string, std::size_t> holder_of_;
};

}  // namespace braid::io
