#include "checkpoint/adapters.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "io/finite.hpp"
#include "io/weight_shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <system_error>

namespace braid::checkpoint {

std::vector<model::Tensor<float>>& trained_tensors(model::Model& m) {
  return m.options().lora.enabled() ? m.adapters() : m.tensors();
}

const std::vector<model::Tensor<float>>& trained_tensors(const model::Model& m) {
  return trained_tensors(const_cast<model::Model&>(m));
}

std::optional<AdapterFile> read_adapter_file(const std::filesystem::path& spec) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(spec, ec)) return std::nullopt;
  const io::WeightShardMeta meta = io::WeightShardReader(spec).meta();
  if (meta.kind != "adapters") return std::nullopt;
  const std::string file = spec.string();
  const json cfg = json::parse(meta.adapter_config);
  auto need = [&](const char* key) -> const json& {
    if (!cfg.is_object() || !cfg.contains(key)) throw InputError(file, fmt::format("adapter_config.{}", key), "is missing");
    return cfg.at(key);
  };
  AdapterFile out;
  out.path = spec;
  out.step = meta.step;
  const json& base = need("base");
  if (!base.is_string() || base.get<std::string>().empty())
    throw InputError(file, "adapter_config.base", "must name the base checkpoint");
  const std::filesystem::path b = base.get<std::string>();
  out.base = b.is_absolute() ? b : spec.parent_path() / b;
  const json& r = need("r");
  const json& alpha = need("lora_alpha");
  if (!r.is_number_integer() || r.get<std::int64_t>() < 1 || r.get<std::int64_t>() > (1 << 20))
    throw InputError(file, "adapter_config.r", "must be a positive integer");
  if (!alpha.is_number() || !(alpha.get<double>() > 0)) throw InputError(file, "adapter_config.lora_alpha", "must be > 0");
  out.lora.rank = r.get<int>();
  out.lora.alpha = alpha.get<double>();
  if (cfg.contains("use_rslora")) {
    if (!cfg.at("use_rslora").is_boolean()) throw InputError(file, "adapter_config.use_rslora", "must be true or false");
    out.lora.rslora = cfg.at("use_rslora").get<bool>();
  }
  if (cfg.contains("lora_dropout")) {
    const json& d = cfg.at("lora_dropout");
    if (!d.is_number() || !(d.get<double>() >= 0 && d.get<double>() < 1))
      throw InputError(file, "adapter_config.lora_dropout", "must be a number in [0, 1)");
    out.lora.dropout = d.get<double>();
  }
  const json& targets = need("target_modules");
  if (!targets.is_array() || targets.empty()) throw InputError(file, "adapter_config.target_modules", "must be a list of modules");
  std::string list;
  for (const json& t : targets) {
    if (!t.is_string()) throw InputError(file, "adapter_config.target_modules", "must hold module names");
    list += (list.empty() ? "" : ",") + t.get<std::string>();
  }
  try {
    out.lora.targets = model::parse_lora_targets(list);
  } catch (const std::invalid_argument& e) {
    throw InputError(file, "adapter_config.target_modules", e.what());
  }
  if (cfg.contains("modules_to_save") && !cfg.at("modules_to_save").is_null()) {
    const json& save = cfg.at("modules_to_save");
    if (!save.is_array() || save.size() > 1 || (save.size() == 1 && save[0] != "score"))
      throw InputError(file, "adapter_config.modules_to_save", "must be [\"score\"] (the value head) or empty");
    out.lora.value_head = save.size() == 1;
  }
  return out;
}

json adapter_config(const model::LoraOptions& lo, const std::filesystem::path& base) {
  json cfg = {{"base", base.string()}, {"r", lo.rank}, {"lora_alpha", lo.alpha}, {"use_rslora", lo.rslora},
              {"target_modules", lo.targets.empty() ? model::lora_modules() : lo.targets}};
  if (lo.dropout > 0) cfg["lora_dropout"] = lo.dropout;
  if (lo.value_head) cfg["modules_to_save"] = {"score"};
  return cfg;
}

std::vector<AdapterTensor> whole_adapters(const model::Model& m) {
  std::vector<AdapterTensor> out;
  for (const auto& t : const_cast<model::Model&>(m).adapters())
    out.push_back({t.name, t.full_shape, model::whole_values(m.backend(), m.tensor_parallel(), m.config(), t)});
  return out;
}

void write_adapter_file(const std::filesystem::path& path, const model::LoraOptions& lora,
                        const std::filesystem::path& base, const SaveInfo& info, model::LayerRange layers,
                        std::span<const AdapterTensor> tensors) {
  for (const AdapterTensor& t : tensors) {
    io::require_finite(t.values, path.string(), t.name,
                       fmt::format("adapters after training step {}; nothing written", info.step));
  }
  io::WeightShardMeta meta;
  meta.kind = "adapters";
  meta.model_config = info.config_json;
  meta.layer_begin = layers.begin;
  meta.layer_end = layers.end;
  meta.has_embedding = false;
  meta.has_head = false;
  meta.step = info.step;
  meta.created_by = info.created_by;
  meta.made_from = info.made_from;
  // The base as the reader resolves it: relative to this file's folder where possible.
  std::error_code ec;
  std::filesystem::path named = base;
  const std::filesystem::path folder = std::filesystem::absolute(path, ec).parent_path();
  const std::filesystem::path rel = std::filesystem::relative(std::filesystem::absolute(base, ec), folder, ec);
  if (!ec && !rel.empty()) named = rel;
  meta.adapter_config = adapter_config(lora, named).dump();
  io::WeightShardWriter w(path, meta);
  for (const AdapterTensor& t : tensors) w.add(t.name, t.shape, t.values.data());
  w.commit();
}

void save_adapters(const model::Model& m, const std::filesystem::path& path, const std::filesystem::path& base,
                   const SaveInfo& info, bool write) {
  if (!m.options().lora.enabled()) throw std::logic_error("save_adapters: the model has no adapters");
  if (!write) return;
  // Under tp every rank of the group gathers the whole adapters; one writes them.
  const std::vector<AdapterTensor> whole = whole_adapters(m);
  if (m.tensor_parallel().rank != 0) return;
  SaveInfo full = info;
  if (full.config_json.empty()) full.config_json = model::config_to_json(m.config()).dump();
  write_adapter_file(path, m.options().lora, base, full, {m.layer_begin(), m.layer_end()}, whole);
}

void load_adapters(model::Model& m, const AdapterFile& file) {
  const std::string name = file.path.string();
  if (!model::same_adapters(m.options().lora, file.lora))
    throw InputError(name, "adapter_config",
                     fmt::format("holds adapters of {} where the model's are of {}", model::describe(file.lora),
                                 model::describe(m.options().lora)));
  const io::WeightShardSet set({file.path});
  if (model::config_to_json(config_of(set)) != model::config_to_json(m.config()))
    throw InputError(name, "model_config", "differs from the base model's config");
  const io::WeightShardReader& r = set.shards().front();
  // A tensor that is no adapter of these options (another module, a typo) would be dropped
  // without a word: refused. Those of layers outside the model's are another stage's.
  for (const auto& tensor : r.names()) {
    const auto& adapters = m.adapters();
    int layer = -1;
    std::sscanf(tensor.c_str(), "model.layers.%d.", &layer);
    // (The value head's copy, outside the layers, is the last stage's.)
    const bool other_stage = layer >= 0 ? layer < m.layer_begin() || layer >= m.layer_end() : !m.is_last_stage();
    if (!other_stage && std::none_of(adapters.begin(), adapters.end(), [&](const auto& t) { return t.name == tensor; })) {
      throw InputError(name, tensor,
                       fmt::format("is not an adapter of {} on this model: loading would drop it",
                                   model::describe(m.options().lora)));
    }
  }
  std::vector<float> host;
  for (auto& t : m.adapters()) {
    if (!r.contains(t.name)) throw InputError(name, t.name, "tensor is missing from the adapter file");
    // The file holds whole adapters; a tp rank reads its slice of each.
    if (r.shape(t.name) != io::Shape(t.full_shape))
      throw InputError(name, t.name, fmt::format("shape {} where the model's adapter is {}", io::shape_string(r.shape(t.name)),
                                                 io::shape_string(t.full_shape)));
    host.resize(std::size_t(t.numel));
    if (t.slice.split()) r.read_slice(t.name, t.slice.axis, t.slice.begin, t.slice.end, host.data());
    else r.read(t.name, host.data());
    io::require_finite(host, name, t.name, "adapter values");
    model::write_values(m.backend(), t, host.data());
  }
}

void add_checkpoint_input(io::MadeFrom& m, const std::string& role, const std::filesystem::path& spec) {
  m.add_input(role, checkpoint_files(spec));
  if (const auto adapters = read_adapter_file(spec)) m.add_input(role + " base", checkpoint_files(adapters->base));
}

}  // namespace braid::checkpoint
