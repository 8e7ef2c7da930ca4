#include "hf/peft.hpp"

#include "backend/backend.hpp"
#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "hf/safetensors.hpp"
#include "io/finite.hpp"
#include "io/weight_shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string_view>

namespace braid::hf {

namespace {

constexpr const char* kPeftPrefix = "base_model.model.";

// The base tensor an adapter tensor adapts ("...q_proj.lora_A.weight" -> "...q_proj.weight").
std::string adapted_weight(const std::string& braid_name) {
  static const std::regex pattern(R"(^(model\.layers\.\d+\.(self_attn|mlp)\.[a-z_]+_proj)\.lora_[AB]\.weight$)");
  std::smatch m;
  return std::regex_match(braid_name, m, pattern) ? m[1].str() + ".weight" : std::string();
}

bool is_head(const std::string& braid_name) { return braid_name == "score.weight" || braid_name == "score.bias"; }

}  // namespace

std::string peft_tensor_name(const std::string& braid_name) { return kPeftPrefix + braid_name; }

std::string braid_adapter_name(const std::string& peft_name) {
  const std::string prefix = kPeftPrefix;
  if (!peft_name.starts_with(prefix)) return "";
  std::string name = peft_name.substr(prefix.size());
  // PEFT keeps the adapter's name in memory ("lora_A.default.weight", a saved module's
  // "score.modules_to_save.default.weight") and drops it on saving.
  for (const std::string_view wrapper : {"modules_to_save.default.", "default."}) {
    const auto at = name.find(wrapper);
    if (at != std::string::npos) name.erase(at, wrapper.size());
  }
  return adapted_weight(name).empty() && !is_head(name) ? "" : name;
}

namespace {

// A base checkpoint's tensor shape, InputError naming the base and the tensor when it has none.
io::Shape base_shape(const io::WeightShardSet& shards, const std::filesystem::path& base, const std::string& name) {
  if (!shards.contains(name)) throw InputError(base.string(), name, "is missing from the base");
  return shards.holder(name).shape(name);
}

}  // namespace

std::vector<std::filesystem::path> export_peft(const std::filesystem::path& adapter_file,
                                               const std::filesystem::path& out_dir, ValueHeadClass value_head) {
  const auto file = checkpoint::read_adapter_file(adapter_file);
  if (!file) throw InputError(adapter_file.string(), "kind", "is not a LoRA adapter file (braid-train --lora-rank writes one)");
  const io::WeightShardReader r(adapter_file);
  const json stored = json::parse(r.meta().adapter_config);
  const auto& lo = file->lora;
  // A reward model's or critic's adapters: PEFT's sequence or token classification, the
  // value head its module to save (PEFT saves it as base_model.model.score.weight).
  std::string task = "CAUSAL_LM";
  if (lo.value_head) {
    const json config = parse_json_text(r.meta().model_config, adapter_file.string());
    const model::ModelConfig mc = checkpoint::config_of(io::WeightShardSet({adapter_file}));
    task = token_classification(config, mc.family, r.contains("score.bias"), value_head, adapter_file.string())
               ? "TOKEN_CLS"
               : "SEQ_CLS";
  }
  ordered_json cfg = {{"peft_type", "LORA"},
                      {"task_type", task},
                      {"base_model_name_or_path", stored.at("base").get<std::string>()},
                      {"r", lo.rank},
                      {"lora_alpha", lo.alpha},
                      {"use_rslora", lo.rslora},
                      {"lora_dropout", lo.dropout},
                      {"target_modules", lo.targets.empty() ? model::lora_modules() : lo.targets},
                      {"bias", "none"},
                      {"fan_in_fan_out", false},
                      {"modules_to_save", lo.value_head ? json{"score"} : json(nullptr)},
                      {"init_lora_weights", true},
                      {"inference_mode", true}};
  // Written into a temporary folder beside out_dir and moved into it at the end, as a model's
  // export is: a failure part way (a full disk, a file-size limit) leaves nothing half-written.
  AtomicFolder folder(out_dir);
  const auto weights = folder.temp_path() / "adapter_model.safetensors";
  const auto config = folder.temp_path() / "adapter_config.json";
  SafetensorsWriter w(weights);
  w.set_metadata("format", "pt");
  for (const std::string& name : r.names()) {
    const io::Shape shape = r.shape(name);
    w.add(peft_tensor_name(name), shape, [&r, name](float* dst) { r.read(name, dst); });
  }
  w.commit();
  write_text_file(config.string(), cfg.dump(2) + "\n");
  folder.commit();
  return {folder.final_of(config), folder.final_of(weights)};
}

std::vector<std::filesystem::path> export_merged(const std::filesystem::path& adapter_file,
                                                 const std::filesystem::path& out_dir, const ExportOptions& opt) {
  if (!checkpoint::read_adapter_file(adapter_file))
    throw InputError(adapter_file.string(), "kind", "is not a LoRA adapter file (braid-train --lora-rank writes one)");
  auto be = backend::make_cpu_backend();
  const checkpoint::OpenedModel opened = checkpoint::open_model(adapter_file, *be);
  opened.model->merge_adapters();
  // The merged weights as a checkpoint of their own, exported, then removed.
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path merged = out_dir / ".merged-weights.h5";
  checkpoint::save_weights(*opened.model, merged,
                           {.step = opened.step, .created_by = "braid export --merge " + adapter_file.string(),
                            .config_json = opened.config_json});
  std::vector<std::filesystem::path> files;
  try {
    files = export_hf({merged}, out_dir, opt);
  } catch (...) {
    std::filesystem::remove(merged);
    throw;
  }
  std::filesystem::remove(merged);
  return files;
}

model::LoraOptions parse_adapter_config(const json& cfg, const std::string& cfile) {
  auto need = [&](const char* key) -> const json& {
    if (!cfg.is_object()) throw InputError(cfile, "", "expected a JSON object (PEFT's adapter_config.json)");
    if (!cfg.contains(key)) throw InputError(cfile, key, "is missing");
    return cfg.at(key);
  };
  // Optional keys of peft's: absent or null, else of their type.
  auto given = [&](const char* key) { return cfg.contains(key) && !cfg.at(key).is_null(); };
  auto flag = [&](const char* key) {
    if (!given(key)) return false;
    if (!cfg.at(key).is_boolean()) throw InputError(cfile, key, "must be true or false");
    return cfg.at(key).get<bool>();
  };
  if (need("peft_type") != "LORA") throw InputError(cfile, "peft_type", "is not LORA");
  model::LoraOptions lo;
  const json& r = need("r");
  if (!r.is_number_integer() || r.get<std::int64_t>() < 1 || r.get<std::int64_t>() > model::kMaxLoraRank)
    throw InputError(cfile, "r", fmt::format("must be an integer in [1, {}]", model::kMaxLoraRank));
  lo.rank = r.get<int>();
  const json& alpha = need("lora_alpha");
  if (!alpha.is_number() || !(alpha.get<double>() > 0) || alpha.get<double>() > model::kMaxLoraAlpha)
    throw InputError(cfile, "lora_alpha", fmt::format("must be a number in (0, {:g}]", model::kMaxLoraAlpha));
  lo.alpha = alpha.get<double>();
  lo.rslora = flag("use_rslora");
  if (given("bias") && cfg.at("bias") != "none")
    throw InputError(cfile, "bias", "trains biases, which braid's adapters do not hold (only \"none\")");
  for (const char* key : {"rank_pattern", "alpha_pattern", "layers_to_transform"}) {
    if (given(key) && !cfg.at(key).empty())
      throw InputError(cfile, key, "is not supported by braid's adapters (every adapted layer alike)");
  }
  // Modules trained in full: the value head alone ("score"; PEFT's sequence classification
  // names "classifier" too, which a decoder of braid's families does not have).
  if (given("modules_to_save")) {
    const json& save = cfg.at("modules_to_save");
    if (!save.is_array()) throw InputError(cfile, "modules_to_save", "must be a list of module names");
    for (const json& m : save) {
      if (m != "score" && m != "classifier")
        throw InputError(cfile, "modules_to_save",
                         fmt::format("names {}: braid trains only the value head (score) in full beside the adapters",
                                     m.dump()));
    }
  }
  // How PEFT made the adapters before training: a flag or "gaussian" sets the adapters alone
  // (the file holds them trained); PiSSA, OLoRA, LoftQ and CorDA also rewrite the base weights
  // they were trained on, which the base given here does not hold.
  if (given("init_lora_weights")) {
    const json& init = cfg.at("init_lora_weights");
    if (init.is_string()) {
      const auto& how = init.get_ref<const std::string&>();
      for (const char* rewrites : {"pissa", "olora", "loftq", "corda"}) {
        if (how.starts_with(rewrites))
          throw InputError(cfile, "init_lora_weights",
                           fmt::format("is \"{}\": those adapters were trained on a rewritten base, which the base "
                                       "given does not hold (convert them to plain LoRA with PEFT first)",
                                       how));
      }
      if (how != "gaussian" && how != "eva")
        throw InputError(cfile, "init_lora_weights",
                         fmt::format("is \"{}\", expected true, false, \"gaussian\" or \"eva\"", how));
    } else if (!init.is_boolean()) {
      throw InputError(cfile, "init_lora_weights", "must be true, false or the name of an initialisation");
    }
  }
  if (flag("use_dora")) throw InputError(cfile, "use_dora", "DoRA is not supported");
  if (flag("fan_in_fan_out")) throw InputError(cfile, "fan_in_fan_out", "is for Conv1D layers (GPT-2's), not braid's");
  // Keys that describe rather than make the adapters: of their type all the same.
  flag("inference_mode");
  for (const char* key : {"task_type", "base_model_name_or_path", "revision", "peft_version"}) {
    if (given(key) && !cfg.at(key).is_string()) throw InputError(cfile, key, "must be a string");
  }
  if (given("lora_dropout")) {
    const json& d = cfg.at("lora_dropout");
    if (!d.is_number() || !(d.get<double>() >= 0 && d.get<double>() < 1))
      throw InputError(cfile, "lora_dropout", "must be a number in [0, 1)");
    lo.dropout = d.get<double>();
  }
  const json& targets = need("target_modules");
  std::string list;
  if (targets.is_string()) {
    if (targets == "all-linear") list = "all";
    else throw InputError(cfile, "target_modules", fmt::format("{} is a pattern braid does not read", targets.dump()));
  } else if (targets.is_array()) {
    for (const json& t : targets) {
      if (!t.is_string()) throw InputError(cfile, "target_modules", "must hold module names");
      list += (list.empty() ? "" : ",") + t.get<std::string>();
    }
  } else {
    throw InputError(cfile, "target_modules", "must be a list of module names");
  }
  try {
    lo.targets = model::parse_lora_targets(list);
  } catch (const std::invalid_argument& e) {
    throw InputError(cfile, "target_modules", e.what());
  }
  return lo;
}

std::filesystem::path import_peft(const std::filesystem::path& peft_dir, const std::filesystem::path& base,
                                  const std::filesystem::path& out, const std::string& created_by,
                                  const std::string& made_from) {
  const std::string cfile = (peft_dir / "adapter_config.json").string();
  const json cfg = load_json_file(cfile);
  model::LoraOptions lo = parse_adapter_config(cfg, cfile);

  // The base's headers: its config and every adapted weight's shape.
  const io::WeightShardSet shards(checkpoint::checkpoint_files(base));
  const model::ModelConfig mc = checkpoint::config_of(shards);
  const auto weights = peft_dir / "adapter_model.safetensors";
  const SafetensorsReader st(weights);
  const std::string wfile = weights.string();
  std::map<std::string, std::string> by_braid;   // braid name -> PEFT name
  for (const std::string& name : st.names()) {
    const std::string b = braid_adapter_name(name);
    if (b.empty())
      throw InputError(wfile, name, "is not a LoRA adapter tensor of a decoder layer's linear layer, nor the value head");
    by_braid[b] = name;
  }
  lo.value_head = by_braid.contains("score.weight");
  const bool listed = cfg.contains("modules_to_save") && cfg.at("modules_to_save").is_array() &&
                      std::find(cfg.at("modules_to_save").begin(), cfg.at("modules_to_save").end(), "score") !=
                          cfg.at("modules_to_save").end();
  if (listed && !lo.value_head)
    throw InputError(wfile, peft_tensor_name("score.weight"), "is missing (modules_to_save names score)");
  if (by_braid.contains("score.bias") && !lo.value_head)
    throw InputError(wfile, peft_tensor_name("score.weight"), "is missing beside score.bias");
  io::WeightShardMeta meta;
  meta.kind = "adapters";
  meta.model_config = shards.shards().front().meta().model_config;
  meta.layer_end = mc.num_hidden_layers;
  meta.step = 0;
  meta.created_by = created_by;
  meta.made_from = made_from;
  std::error_code ec;
  const auto folder = std::filesystem::absolute(out, ec).parent_path();
  auto named = std::filesystem::relative(std::filesystem::absolute(base, ec), folder, ec);
  if (ec || named.empty()) named = base;
  meta.adapter_config = checkpoint::adapter_config(lo, named).dump();
  io::WeightShardWriter w(out, meta);
  std::vector<float> host;
  std::size_t used = 0;
  // A tensor of the folder into host, its shape the one the base's `of` needs, its values finite.
  auto read_as = [&](const std::string& peft, const io::Shape& shape, const std::string& of) {
    if (st.info(peft).shape != shape)
      throw InputError(wfile, peft, fmt::format("shape {} where the base {}'s {} needs {}: adapters of another model?",
                                                io::shape_string(st.info(peft).shape), base.string(), of,
                                                io::shape_string(shape)));
    host = st.read(peft);
    io::require_finite(host, wfile, peft, "adapter values");
    ++used;
  };
  for (int l = 0; l < mc.num_hidden_layers; ++l) {
    for (const std::string& module : lo.targets) {
      const char* block = module == "gate_proj" || module == "up_proj" || module == "down_proj" ? "mlp" : "self_attn";
      const std::string stem = fmt::format("model.layers.{}.{}.{}", l, block, module);
      const io::Shape ws = base_shape(shards, base, stem + ".weight");   // [out, in]
      for (const auto& [part, shape] : {std::pair{"lora_A", io::Shape{lo.rank, ws[1]}},
                                        std::pair{"lora_B", io::Shape{ws[0], lo.rank}}}) {
        const std::string name = stem + "." + part + ".weight";
        const auto it = by_braid.find(name);
        if (it == by_braid.end()) throw InputError(wfile, peft_tensor_name(name), "is missing");
        read_as(it->second, shape, stem);
        w.add(name, shape, host.data());
      }
    }
  }
  // The value head's trained copy, shaped as the base's head; a head without the base's bias
  // keeps the base's (PEFT's copy starts as the base's module).
  if (lo.value_head) {
    for (const std::string& name : {std::string("score.weight"), std::string("score.bias")}) {
      const auto it = by_braid.find(name);
      if (name == "score.bias" && !shards.contains(name)) {
        if (it != by_braid.end())
          throw InputError(wfile, it->second, fmt::format("the base {} has no score bias to train", base.string()));
        continue;
      }
      const io::Shape shape = base_shape(shards, base, name);
      if (it == by_braid.end()) {
        host.resize(std::size_t(io::numel(shape)));
        shards.holder(name).read(name, host.data());
      } else {
        read_as(it->second, shape, name);
      }
      w.add(name, shape, host.data());
    }
  }
  if (used != by_braid.size())
    throw InputError(wfile, "target_modules", "the file holds adapters of modules or layers the config does not name");
  w.commit();
  return out;
}

}  // namespace braid::hf
