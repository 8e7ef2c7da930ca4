#include "train/checkpoint.hpp"

#include "core/error.hpp"
#include "core/json.hpp"

#include <fmt/format.h>

namespace braid::train {

std::vector<model::LayerRange> split_layers(int num_layers, int stages) {
  if (stages < 1 || stages > num_layers) {
    throw UsageError(fmt::format("cannot split {} layers into {} stages", num_layers, stages));
  }
  std::vector<model::LayerRange> out;
  int begin = 0;
  for (int s = 0; s < stages; ++s) {
    const int n = num_layers / stages + (s < num_layers % stages ? 1 : 0);
    out.push_back({begin, begin + n});
    begin += n;
  }
  return out;
}

std::filesystem::path stage_path(const std::filesystem::path& out, int stage, int stages) {
  if (stages == 1) return out;
  std::filesystem::path p = out;
  p.replace_filename(fmt::format("{}.stage{}-of-{}{}", out.stem().string(), stage, stages, out.extension().string()));
  return p;
}

std::vector<std::filesystem::path> stage_paths(const std::filesystem::path& out, int stages) {
  std::vector<std::filesystem::path> v;
  for (int s = 0; s < stages; ++s) v.push_back(stage_path(out, s, stages));
  return v;
}

namespace {

// The copy of the embedding a tied last stage holds as its head: written by the first stage only.
bool is_tied_head_copy(const model::Model& m, const std::string& name) {
  return name == "model.embed_tokens.weight" && !m.is_first_stage();
}

}  // namespace

void save_weights(const model::Model& m, const std::filesystem::path& path, const SaveInfo& info) {
  io::WeightShardMeta meta;
  meta.model_config = info.config_json.empty() ? model::config_to_json(m.config()).dump() : info.config_json;
  meta.layer_begin = m.layer_begin();
  meta.layer_end = m.layer_end();
  meta.has_embedding = m.is_first_stage();
  meta.has_head = m.is_last_stage();
  meta.step = info.step;
  meta.created_by = info.created_by;
  io::WeightShardWriter w(path, meta);
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for (const auto& t : m.tensors()) {
    if (is_tied_head_copy(m, t.name)) continue;
    const float* src = t.data;
    if (!be.host_accessible()) {
      host.resize(static_cast<std::size_t>(t.numel));
      be.copy_to_host(host.data(), t.data, host.size() * sizeof(float));
      src = host.data();
    }
    w.add(t.name, t.shape, src);
  }
  w.commit();
}

void load_weights(model::Model& m, const io::WeightShardSet& shards) {
  const model::ModelConfig stored = config_of(shards);
  const model::ModelConfig& cfg = m.config();
  if (model::config_to_json(stored) != model::config_to_json(cfg)) {
    throw InputError(shards.shards().front().path().string(), "model_config",
                     fmt::format("the checkpoint's model config {} differs from the model's {}",
                                 model::config_to_json(stored).dump(), model::config_to_json(cfg).dump()));
  }
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for (auto& t : m.tensors()) {
    if (!shards.contains(t.name)) {
      std::string files;
      for (const auto& s : shards.shards()) files += (files.empty() ? "" : ", ") + s.path().string();
      throw InputError(files, t.name, "tensor is in none of the checkpoint's files");
    }
    const auto& holder = shards.holder(t.name);
    const io::Shape shape = holder.shape(t.name);
    if (shape != t.shape) {
      throw InputError(holder.path().string(), t.name,
                       fmt::format("shape {} where the model needs {}", io::shape_string(shape), io::shape_string(t.shape)));
    }
    if (be.host_accessible()) {
      holder.read(t.name, t.data);
    } else {
      host.resize(static_cast<std::size_t>(t.numel));
      holder.read(t.name, host.data());
      be.copy_to_device(t.data, host.data(), host.size() * sizeof(float));
    }
  }
}

model::ModelConfig config_of(const io::WeightShardSet& shards) {
  if (shards.shards().empty()) throw UsageError("a checkpoint needs at least one weight file");
  const auto& first = shards.shards().front();
  const std::string origin = first.path().string() + ":model_config";
  if (first.meta().model_config.empty()) throw InputError(first.path().string(), "model_config", "is empty");
  return model::parse_config(parse_json_text(first.meta().model_config, origin), origin);
}

}  // namespace braid::train
