#include "checkpoint/reshard.hpp"

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/whole_tensors.hpp"
#include "core/error.hpp"
#include "model/tensor_parallel.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace braid::checkpoint {
namespace {

// The stage of `stages` (layers split by split_layers) that holds parameter `name`.
int stage_of(const std::string& name, const std::vector<model::LayerRange>& ranges) {
  static const std::string layers = "model.layers.";
  if (name.rfind(layers, 0) == 0) {
    const int layer = std::atoi(name.c_str() + layers.size());
    for (std::size_t s = 0; s < ranges.size(); ++s) {
      if (layer >= ranges[s].begin && layer < ranges[s].end) return static_cast<int>(s);
    }
  }
  if (name == "model.embed_tokens.weight") return 0;
  return static_cast<int>(ranges.size()) - 1;  // the final norm, the LM head, the value head
}

}  // namespace

std::vector<std::filesystem::path> reshard(const std::vector<std::filesystem::path>& files,
                                           const std::filesystem::path& out, ReshardLayout layout,
                                           const std::string& created_by) {
  if (files.empty()) throw UsageError("reshard: no input files");
  const WholeTensors whole(files);
  const model::ModelConfig& cfg = whole.config();
  const std::string& kind = whole.kind();
  if (kind != "weights" && kind != "optimizer") {
    throw InputError(whole.file().string(), "attribute kind",
                     fmt::format("is \"{}\": weights or optimizer state are resharded", kind));
  }
  if (whole.layer_begin() != 0 || whole.layer_end() != cfg.num_hidden_layers) {
    throw InputError(whole.file().string(), "layer_end",
                     fmt::format("the files hold layers [{}, {}) of a {}-layer model: reshard needs every stage",
                                 whole.layer_begin(), whole.layer_end(), cfg.num_hidden_layers));
  }
  int in_stages = 0;
  for (const auto& f : files) in_stages += io::WeightShardReader(f).meta().tp_rank == 0 ? 1 : 0;
  const int tp_size = layout.tp > 0 ? layout.tp : whole.tp_size();
  const int stages = layout.stages > 0 ? layout.stages : in_stages;
  try {
    model::check_tensor_parallel(cfg, tp_size);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("reshard: {}", e.what()));
  }
  const std::vector<model::LayerRange> ranges = split_layers(cfg.num_hidden_layers, stages);

  // Every output file is written in full before the first is committed, so a failure
  // (a tensor that does not join) leaves none behind.
  std::vector<std::vector<io::WeightShardWriter>> writers(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    for (int q = 0; q < tp_size; ++q) {
      io::WeightShardMeta meta = whole.meta();
      meta.layer_begin = ranges[static_cast<std::size_t>(s)].begin;
      meta.layer_end = ranges[static_cast<std::size_t>(s)].end;
      meta.has_embedding = s == 0;
      meta.has_head = s == stages - 1;
      meta.tp_rank = q;
      meta.tp_size = tp_size;
      meta.created_by = created_by;
      writers[static_cast<std::size_t>(s)].emplace_back(stage_path(tp_path(out, q, tp_size), s, stages), meta);
    }
  }
  for (const std::string& name : whole.names()) {
    // An optimizer state's "<parameter>.<moment>" is placed and split as its parameter.
    const std::string param = kind == "optimizer" ? name.substr(0, name.rfind('.')) : name;
    const io::Shape full_shape = whole.shape(name);
    const std::vector<float> full = whole.read(name);
    auto& stage = writers[static_cast<std::size_t>(stage_of(param, ranges))];
    for (int q = 0; q < tp_size; ++q) {
      const model::TpSlice sl = model::tp_slice(cfg, param, full_shape, tp_size, q);
      io::Shape shape = full_shape;
      if (sl.split()) shape[std::size_t(sl.axis)] = sl.end - sl.begin;
      stage[static_cast<std::size_t>(q)].add(name, shape, model::extract_slice(full.data(), full_shape, sl));
    }
  }
  std::vector<std::filesystem::path> written;
  for (auto& stage : writers) {
    for (auto& w : stage) {
      w.commit();
      written.push_back(w.path());
    }
  }
  return written;
}

}  // namespace braid::checkpoint
