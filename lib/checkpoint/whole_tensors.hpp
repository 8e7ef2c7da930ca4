// The whole tensors of a checkpoint (weights, or an optimizer state), whatever its
// tensor-parallel degree and stage split: at tp 1 each tensor is read from the stage file
// that holds it; at tp N from the N ranks' files, their slices joined along the tensor's
// split axis (model/tensor_parallel.hpp). Every reader that needs a checkpoint at another
// degree than it was written at goes through here: opening a model (slicing the whole
// tensor again for its own tp rank), loading an optimizer state, `braid export`,
// `braid reshard`.
//
//   WholeTensors w(checkpoint_files("run/actor.h5"));   // actor.tp0-of-2.stage0-of-2.h5 ...
//   std::vector<float> q = w.read("model.layers.0.self_attn.q_proj.weight");   // the whole matrix
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/weight_shard.hpp"
#include "model/config.hpp"
#include "model/tensor_parallel.hpp"

namespace braid::checkpoint {

class WholeTensors {
 public:
  // InputError (naming the file and attribute or tensor) for files of two kinds or two
  // degrees, a missing tp rank, or ranks whose files hold other tensors.
  explicit WholeTensors(const std::vector<std::filesystem::path>& files);

  const io::WeightShardMeta& meta() const { return ranks_.front().shards().front().meta(); }
  // tp rank 0's first file (for messages).
  const std::filesystem::path& file() const { return ranks_.front().shards().front().path(); }
  const std::string& kind() const { return meta().kind; }
  int tp_size() const { return static_cast<int>(ranks_.size()); }
  const model::ModelConfig& config() const { return config_; }
  // Smallest layer_begin and largest layer_end over the files.
  int layer_begin() const { return ranks_.front().layer_begin(); }
  int layer_end() const { return ranks_.front().layer_end(); }

  std::vector<std::string> names() const { return ranks_.front().names(); }
  bool contains(const std::string& name) const { return ranks_.front().contains(name); }
  // The file of tp rank 0 that holds `name` (for messages).
  const io::WeightShardReader& holder(const std::string& name) const { return ranks_.front().holder(name); }
  // The whole tensor's shape and values. InputError naming the file when a rank lacks the
  // tensor, a slice has another shape than its rank's share, or a replicated tensor differs
  // between ranks.
  io::Shape shape(const std::string& name) const;
  std::vector<float> read(const std::string& name) const;

 private:
  // The parameter whose split an optimizer state's "<parameter>.<moment>" follows.
  std::string parameter_of(const std::string& name) const;

  std::vector<io::WeightShardSet> ranks_;  // by tp rank
  model::ModelConfig config_;
};

// The tensor `name` of `whole` as a model's tp slice holds it (all of it when the slice
// is not split): `full_shape` must be the whole tensor's shape (InputError naming the
// file otherwise).
std::vector<float> read_as_slice(const WholeTensors& whole, const std::string& name, const io::Shape& full_shape,
                                 const model::TpSlice& slice);

}  // namespace braid::checkpoint
