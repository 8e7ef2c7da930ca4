#include "checkpoint/checkpoint.hpp"

#include "checkpoint/adapters.hpp"
#include "checkpoint/whole_tensors.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "io/finite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string_view>

namespace braid::checkpoint {

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

std::filesystem::path tp_path(const std::filesystem::path& out, int rank, int size) {
  if (size == 1) return out;
  std::filesystem::path p = out;
  p.replace_filename(fmt::format("{}.tp{}-of-{}{}", out.stem().string(), rank, size, out.extension().string()));
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

// "model.layers.12.mlp.up_proj.weight" -> "mlp.up_proj.weight"; "" for a tensor outside the layers.
std::string layer_suffix(const std::string& name) {
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return "";
  const auto dot = name.find('.', kLayers.size());
  return dot == std::string::npos ? "" : name.substr(dot + 1);
}

// A tensor of the checkpoint that no model of its config holds (a bias of a layout braid
// does not know, a typo) would be dropped without a word by loading: refused instead.
// Tensors of other stages' layers and heads are another model's or stage's, not unknown.
// `file_of(name)`: the file that holds it, for the message.
void refuse_unknown_tensors(const model::Model& m, const std::vector<std::string>& names,
                            const std::function<std::string(const std::string&)>& file_of) {
  std::set<std::string> layer_tensors;
  for (const auto& t : m.tensors()) {
    if (const auto suffix = layer_suffix(t.name); !suffix.empty()) layer_tensors.insert(suffix);
  }
  static const std::set<std::string> kOutside = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                                                 "score.weight", "score.bias"};
  for (const auto& name : names) {
    const auto suffix = layer_suffix(name);
    const bool known = suffix.empty() ? kOutside.count(name) > 0 : layer_tensors.empty() || layer_tensors.count(suffix) > 0;
    if (!known) {
      throw InputError(file_of(name), name,
                       "is not a tensor of this model (its model_config holds no such parameter): loading would "
                       "drop it");
    }
  }
}

}  // namespace

void save_weights(const model::Model& m, const std::filesystem::path& path, const SaveInfo& info) {
  io::WeightShardMeta meta;
  meta.model_config = info.config_json.empty() ? model::config_to_json(m.config()).dump() : info.config_json;
  meta.layer_begin = m.layer_begin();
  meta.layer_end = m.layer_end();
  meta.has_embedding = m.is_first_stage();
  meta.has_head = m.is_last_stage();
  meta.tp_rank = m.tensor_parallel().rank;   // the tensors are this rank's slices
  meta.tp_size = m.tensor_parallel().size;
  meta.step = info.step;
  meta.created_by = info.created_by;
  meta.made_from = info.made_from;
  io::WeightShardWriter w(path, meta);
  backend::Backend& be = m.backend();
  std::vector<float> host;
  for (const auto& t : m.tensors()) {
    if (is_tied_head_copy(m, t.name)) continue;
    // Files hold f32: the master copy when there is one, else the compute copy widened.
    const float* src = t.data;
    if (!src || !be.host_accessible()) {
      host.resize(static_cast<std::size_t>(t.numel));
      model::read_values(be, t, host.data());
      src = host.data();
    }
    w.add(t.name, t.shape, src);
  }
  w.commit();
}

void require_finite_weights(const model::Model& m, const std::filesystem::path& file, std::int64_t step) {
  backend::Backend& be = m.backend();
  std::vector<float> host;
  std::vector<const model::Tensor<float>*> all;
  for (const auto& t : m.tensors()) all.push_back(&t);
  for (const auto& t : const_cast<model::Model&>(m).adapters()) all.push_back(&t);
  for (const model::Tensor<float>* tp : all) {
    const model::Tensor<float>& t = *tp;
    const float* src = t.data;
    if (!src || !be.host_accessible()) {
      host.resize(static_cast<std::size_t>(t.numel));
      model::read_values(be, t, host.data());
      src = host.data();
    }
    io::require_finite({src, static_cast<std::size_t>(t.numel)}, file.string(), t.name,
                       fmt::format("weights after training step {}; nothing written", step));
  }
}

void load_weights(model::Model& m, const io::WeightShardSet& shards) {
  for (const auto& s : shards.shards()) {
    if (s.meta().kind != "weights") {
      throw InputError(s.path().string(), "attribute kind",
                       fmt::format("is \"{}\": optimizer state, not a model's weights", s.meta().kind));
    }
  }
  const model::ModelConfig stored = config_of(shards);
  const model::ModelConfig& cfg = m.config();
  if (model::config_to_json(stored) != model::config_to_json(cfg)) {
    throw InputError(shards.shards().front().path().string(), "model_config",
                     fmt::format("the checkpoint's model config {} differs from the model's {}",
                                 model::config_to_json(stored).dump(), model::config_to_json(cfg).dump()));
  }
  // Files of the model's own tp slice load as they are; a whole checkpoint (tp 1) loads
  // into any tp rank, each tensor read as the rank's slice. Other degrees need resharding.
  const int file_tp = shards.shards().front().meta().tp_size, file_rank = shards.shards().front().meta().tp_rank;
  const model::TensorParallel& tp = m.tensor_parallel();
  for (const auto& s : shards.shards()) {
    if (s.meta().tp_size != file_tp || s.meta().tp_rank != file_rank) {
      throw InputError(s.path().string(), "attribute tp_rank",
                       fmt::format("tp slice {} of {} loaded with slice {} of {}: the files of one tp rank load together",
                                   s.meta().tp_rank, s.meta().tp_size, file_rank, file_tp));
    }
  }
  if (file_tp != 1 && (file_tp != tp.size || file_rank != tp.rank)) {
    throw InputError(shards.shards().front().path().string(), "attribute tp_size",
                     fmt::format("holds tp slice {} of {} where the model is slice {} of {} (braid reshard --tp {} "
                                 "makes the files of another tp degree)",
                                 file_rank, file_tp, tp.rank, tp.size, tp.size));
  }
  for (const auto& s : shards.shards()) {
    refuse_unknown_tensors(m, s.names(), [&](const std::string&) { return s.path().string(); });
  }
  const bool slicing = file_tp == 1 && tp.size > 1;
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
    const io::Shape& want = slicing ? t.full_shape : t.shape;
    if (shape != want) {
      throw InputError(holder.path().string(), t.name,
                       fmt::format("shape {} where the model needs {}", io::shape_string(shape), io::shape_string(want)));
    }
    auto read = [&](float* dst) {
      if (slicing && t.slice.split()) holder.read_slice(t.name, t.slice.axis, t.slice.begin, t.slice.end, dst);
      else holder.read(t.name, dst);
    };
    if (be.host_accessible() && t.dtype == backend::DType::f32) {
      read(t.data);
    } else {
      // A narrower model takes the file's f32 values rounded to nearest even.
      host.resize(static_cast<std::size_t>(t.numel));
      read(host.data());
      model::write_values(be, t, host.data());
    }
  }
}

void load_weights(model::Model& m, const WholeTensors& whole) {
  if (whole.kind() != "weights") {
    throw InputError(whole.file().string(), "attribute kind",
                     fmt::format("is \"{}\": optimizer state, not a model's weights", whole.kind()));
  }
  const model::ModelConfig& cfg = m.config();
  if (model::config_to_json(whole.config()) != model::config_to_json(cfg)) {
    throw InputError(whole.file().string(), "model_config",
                     fmt::format("the checkpoint's model config {} differs from the model's {}",
                                 model::config_to_json(whole.config()).dump(), model::config_to_json(cfg).dump()));
  }
  refuse_unknown_tensors(m, whole.names(), [&](const std::string& name) { return whole.holder(name).path().string(); });
  backend::Backend& be = m.backend();
  for (auto& t : m.tensors()) {
    if (!whole.contains(t.name)) throw InputError(whole.file().string(), t.name, "tensor is in none of the checkpoint's files");
    const std::vector<float> part = read_as_slice(whole, t.name, t.full_shape, t.slice);
    if (be.host_accessible() && t.dtype == backend::DType::f32) {
      std::copy(part.begin(), part.end(), t.data);
    } else {
      model::write_values(be, t, part.data());
    }
  }
}

bool needs_joining(const std::vector<std::filesystem::path>& files, const model::TensorParallel& tp) {
  if (files.empty()) return false;
  const int degree = io::WeightShardReader(files.front()).meta().tp_size;
  return degree != 1 && degree != tp.size;
}

model::ModelConfig config_of(const io::WeightShardSet& shards) {
  if (shards.shards().empty()) throw UsageError("a checkpoint needs at least one weight file");
  const auto& first = shards.shards().front();
  const std::string origin = first.path().string() + ":model_config";
  if (first.meta().model_config.empty()) throw InputError(first.path().string(), "model_config", "is empty");
  return model::parse_config(parse_json_text(first.meta().model_config, origin), origin);
}

}  // namespace braid::checkpoint

namespace braid::checkpoint {
namespace {

// The files beside spec named <stem><infix>MID<ext>: their MIDs (any order).
std::vector<std::string> names_beside(const std::filesystem::path& spec, const std::string& infix) {
  namespace fs = std::filesystem;
  const fs::path dir = spec.has_parent_path() ? spec.parent_path() : fs::path(".");
  const std::string prefix = spec.stem().string() + infix;
  const std::string ext = spec.extension().string();
  std::vector<std::string> mids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + ext.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
      continue;
    }
    mids.push_back(name.substr(prefix.size(), name.size() - prefix.size() - ext.size()));
  }
  return mids;
}

// Tensor-parallel files beside spec: <stem>.tp<r>-of-<N><ext> (each possibly split into
// stages), every rank's; empty when there are none.
std::vector<std::filesystem::path> tp_files(const std::filesystem::path& spec) {
  namespace fs = std::filesystem;
  std::vector<int> degrees;
  for (const std::string& mid : names_beside(spec, ".tp")) {  // "1-of-2[.stage0-of-3]"
    int rank = 0, size = 0, used = 0;
    if (std::sscanf(mid.c_str(), "%d-of-%d%n", &rank, &size, &used) == 2 && size > 1 && rank >= 0 && rank < size &&
        (mid[std::size_t(used)] == '\0' || mid.compare(std::size_t(used), 6, ".stage") == 0) &&
        std::find(degrees.begin(), degrees.end(), size) == degrees.end()) {
      degrees.push_back(size);
    }
  }
  if (degrees.empty()) return {};
  if (degrees.size() > 1) {
    throw InputError(spec.string(), "", fmt::format("tensor-parallel files of {} different degrees lie beside it", degrees.size()));
  }
  std::vector<fs::path> files;
  for (int r = 0; r < degrees.front(); ++r) {
    const fs::path rank_spec = tp_path(spec, r, degrees.front());
    std::vector<fs::path> mine;
    try {
      mine = checkpoint_files(rank_spec);
    } catch (const InputError&) {
      throw InputError(rank_spec.string(), "", "tp rank's file of the checkpoint is missing");
    }
    files.insert(files.end(), mine.begin(), mine.end());
  }
  return files;
}

}  // namespace

std::vector<std::filesystem::path> remove_other_layouts(const std::filesystem::path& out,
                                                        const std::vector<std::filesystem::path>& written) {
  namespace fs = std::filesystem;
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string stem = out.stem().string(), ext = out.extension().string();
  std::vector<fs::path> candidates{out};
  for (const char* infix : {".stage", ".tp"}) {
    for (const std::string& mid : names_beside(out, infix)) candidates.push_back(dir / (stem + infix + mid + ext));
  }
  auto is_written = [&](const fs::path& p) {
    return std::any_of(written.begin(), written.end(), [&](const fs::path& w) {
      return fs::absolute(w).lexically_normal() == fs::absolute(p).lexically_normal();
    });
  };
  std::vector<fs::path> removed;
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(c, ec) || is_written(c)) continue;
    if (fs::remove(c, ec)) removed.push_back(c);
  }
  return removed;
}


std::vector<std::filesystem::path> checkpoint_files(const std::filesystem::path& spec) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(spec)) return {spec};
  // Stage files: <stem>.stage<i>-of-<S><ext> beside spec.
  const std::string prefix = spec.stem().string() + ".stage";
  const std::string ext = spec.extension().string();
  std::vector<int> splits;
  for (const std::string& mid : names_beside(spec, ".stage")) {  // "2-of-4"
    int stage = 0, stages = 0;
    char tail = 0;
    if (std::sscanf(mid.c_str(), "%d-of-%d%c", &stage, &stages, &tail) == 2 && stages > 1 && stage >= 0 &&
        stage < stages && std::find(splits.begin(), splits.end(), stages) == splits.end()) {
      splits.push_back(stages);
    }
  }
  if (splits.empty()) {
    if (auto files = tp_files(spec); !files.empty()) return files;
    throw InputError(spec.string(), "", "no such weight file, nor stage files " + prefix + "<i>-of-<S>" + ext +
                                            " or tensor-parallel files " + spec.stem().string() + ".tp<r>-of-<N>" + ext);
  }
  if (splits.size() > 1) {
    throw InputError(spec.string(), "", fmt::format("stage files of {} different splits lie beside it", splits.size()));
  }
  std::vector<fs::path> files = stage_paths(spec, splits.front());
  for (const auto& f : files) {
    if (!fs::is_regular_file(f)) throw InputError(f.string(), "", "stage file of the checkpoint is missing");
  }
  return files;
}

bool checkpoint_exists(const std::filesystem::path& spec) {
  try {
    checkpoint_files(spec);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

std::string made_from_of(const std::filesystem::path& spec) {
  return io::WeightShardReader(checkpoint_files(spec).front()).meta().made_from;
}

std::vector<std::filesystem::path> files_of_tp_rank(const std::vector<std::filesystem::path>& files,
                                                    const model::TensorParallel& tp) {
  if (files.size() <= 1) return files;
  std::vector<int> ranks;
  bool own_degree = false;
  for (const auto& f : files) {
    const io::WeightShardMeta meta = io::WeightShardReader(f).meta();
    ranks.push_back(meta.tp_rank);
    own_degree = own_degree || meta.tp_size == tp.size;
  }
  const int pick = own_degree ? tp.rank : 0;
  std::vector<std::filesystem::path> mine;
  for (std::size_t i = 0; i < files.size(); ++i)
    if (ranks[i] == pick) mine.push_back(files[i]);
  return mine;
}

OpenedModel open_model(const std::filesystem::path& spec, backend::Backend& be, model::LayerRange layers,
                       bool need_lm_head, bool need_value_head, backend::DType dtype, model::TensorParallel tp,
                       const model::LoraOptions& lora) {
  if (const auto adapters = read_adapter_file(spec)) {
    const model::LoraOptions& have = adapters->lora;
    if (lora.enabled() && !model::same_adapters(lora, have)) {
      throw InputError(spec.string(), "adapter_config",
                       fmt::format("holds adapters of {} where {} were asked for (leave the LoRA options out to "
                                   "continue these adapters)",
                                   model::describe(have), model::describe(lora)));
    }
    OpenedModel out = open_model(adapters->base, be, layers, need_lm_head, need_value_head, dtype, tp, have);
    load_adapters(*out.model, *adapters);
    out.files.push_back(spec);
    out.step = adapters->step;
    return out;
  }
  OpenedModel out;
  const auto all = checkpoint_files(spec);
  // Files of another tp degree than the model's (neither its own slices nor a whole
  // checkpoint) are read whole, each tensor joined from every rank's slice.
  const bool join = needs_joining(all, tp);
  out.files = join ? all : files_of_tp_rank(all, tp);
  const io::WeightShardSet shards(join ? files_of_tp_rank(all, {}) : out.files);
  const model::ModelConfig cfg = config_of(shards);
  const auto& first = shards.shards().front();
  try {
    model::check_tensor_parallel(cfg, tp.size);
  } catch (const std::invalid_argument& e) {
    throw InputError(first.path().string(), "model_config",
                     fmt::format("does not split into {} tensor-parallel slices: {}", tp.size, e.what()));
  }
  out.step = first.meta().step;
  out.config_json = first.meta().model_config;
  const bool lm = shards.contains("lm_head.weight") || cfg.tie_word_embeddings;
  const bool value = shards.contains("score.weight");
  if (need_lm_head && !lm) throw InputError(spec.string(), "lm_head.weight", "the model has no LM head (a policy needs one)");
  if (need_value_head && !value) {
    throw InputError(spec.string(), "score.weight", "the model has no value head (a critic or reward model needs one)");
  }
  const bool value_bias = value && shards.contains("score.bias");   // a token-classification head's
  out.model = std::make_unique<model::Model>(
      cfg,
      model::ModelOptions{
          .layers = layers, .lm_head = lm, .value_head = value, .value_bias = value_bias, .dtype = dtype, .tp = tp,
          .lora = lora},
      be);
  if (join) {
    load_weights(*out.model, WholeTensors(all));
  } else {
    load_weights(*out.model, shards);
  }
  if (lora.enabled()) {
    out.model->init_adapters(0);
    out.base = spec;
  }
  return out;
}

}  // namespace braid::checkpoint
