#include "hf/import_export.hpp"

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/whole_tensors.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "hf/hf_folder.hpp"
#include "io/weight_shard.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

namespace braid::hf {
namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// What a folder holds for braid: the config it stores (a Gemma 3 with vision: its text
// config), the folder's name of each of braid's tensors, and the folder's tensors that are
// not parameters of the model and are passed over on purpose (RoPE's inv_freq buffers, a
// Gemma 3's vision tower and projector).
struct Source {
  json config;
  std::string origin;                           // where the config came from, for messages
  std::map<std::string, std::string> name_of;   // braid's name -> the folder's
  std::vector<std::string> passed_over;
};

// A Gemma3ForConditionalGeneration's language model under braid's names: transformers
// before 4.52 saved it as language_model.model.* and language_model.lm_head.*, since then as
// model.language_model.* and lm_head.*.
std::string gemma3_text_name(const std::string& name) {
  for (std::string_view p : {"language_model.model.", "model.language_model."}) {
    if (starts_with(name, p)) return "model." + name.substr(p.size());
  }
  if (name == "language_model.lm_head.weight") return "lm_head.weight";
  return name;
}

bool gemma3_vision_part(const std::string& name) {
  for (std::string_view p : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."}) {
    if (starts_with(name, p)) return true;
  }
  return false;
}

Source read_source(const HfFolder& folder) {
  Source s;
  s.origin = folder.config_path().string();
  const json& c = folder.config();
  const bool vision = c.is_object() && c.contains("model_type") && c["model_type"] == "gemma3";
  if (vision) {
    if (!c.contains("text_config") || !c["text_config"].is_object())
      throw InputError(s.origin, "text_config", "missing: a Gemma3ForConditionalGeneration config keeps its text model there");
    // The text_config of a published Gemma 3 names only what differs from Gemma3TextConfig's
    // defaults (gemma-3-4b: hidden_size, intermediate_size, num_hidden_layers, rope_scaling,
    // sliding_window): the shape keys braid requires come from those defaults.
    s.config = json{{"hidden_size", 2304},       {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                    {"num_attention_heads", 8},  {"num_key_value_heads", 4},  {"head_dim", 256},
                    {"vocab_size", 262208}};
    s.config.update(c["text_config"]);
    s.config["model_type"] = "gemma3_text";
    s.config["architectures"] = {"Gemma3ForCausalLM"};
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "transformers_version"}) {
      if (c.contains(key) && !s.config.contains(key)) s.config[key] = c[key];
    }
    s.origin += ":text_config";
  } else {
    s.config = c;
  }
  for (const std::string& name : folder.names()) {
    if (vision && gemma3_vision_part(name)) {
      s.passed_over.push_back(name);
    } else if (ends_with(name, "rotary_emb.inv_freq")) {
      s.passed_over.push_back(name);  // a buffer of the RoPE the config already defines
    } else {
      s.name_of[vision ? gemma3_text_name(name) : name] = name;
    }
  }
  return s;
}

// The class a config.json names, or "".
std::string architecture_of(const json& config) {
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty() &&
      config["architectures"][0].is_string())
    return config["architectures"][0].get<std::string>();
  return "";
}

}  // namespace

std::vector<std::filesystem::path> import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                                             const ImportOptions& opt) {
  const HfFolder folder(hf_dir);
  const Source src = read_source(folder);
  const model::ModelConfig cfg = model::parse_config(src.config, src.origin);
  auto has = [&](const std::string& n) { return src.name_of.count(n) > 0; };
  auto folder_name = [&](const std::string& n) { return src.name_of.at(n); };
  auto where = [&](const std::string& n) { return folder.holder(folder_name(n)).path().string(); };

  // The heads, from the tensors, checked against what the config's class says.
  const bool value_head = has("score.weight");
  const bool value_bias = has("score.bias");
  const bool lm_head = cfg.tie_word_embeddings || has("lm_head.weight");
  if (!lm_head && !value_head) {
    throw InputError(hf_dir.string(), "lm_head.weight",
                     "missing: the model has neither an LM head (lm_head.weight or tie_word_embeddings) nor a "
                     "value head (score.weight)");
  }
  if (value_head) {
    const Shape shape = folder.shape(folder_name("score.weight"));
    if (shape.size() == 2 && shape[0] != 1 && shape[1] == cfg.hidden_size)
      throw InputError(where("score.weight"), "score.weight",
                       fmt::format("has {} labels (num_labels): braid's value head has one", shape[0]));
    // transformers sizes the head from num_labels, or from id2label where it is given: a
    // config that says other than one label would not load these weights.
    for (const char* key : {"num_labels", "id2label"}) {
      if (!src.config.contains(key)) continue;
      const json& v = src.config[key];
      const std::size_t labels = v.is_object() ? v.size() : v.is_number_unsigned() ? v.get<std::size_t>() : 0;
      if (labels != 1)
        throw InputError(src.origin, key,
                         fmt::format("says {} labels, score.weight has one (braid's value head has one)",
                                     v.is_object() || v.is_number_unsigned() ? std::to_string(labels) : v.dump()));
    }
  }
  const std::string arch = architecture_of(src.config);
  if (ends_with(arch, "ForTokenClassification") && value_head && !value_bias)
    throw InputError(hf_dir.string(), "score.bias", fmt::format("missing: {} has a bias on its score head", arch));
  if (ends_with(arch, "ForSequenceClassification") && value_bias)
    throw InputError(where("score.bias"), "score.bias",
                     fmt::format("{} has no bias on its score head: config.json and the weights disagree", arch));
  if (value_bias && !value_head)
    throw InputError(where("score.bias"), "score.bias", "a score bias without score.weight");

  // Every tensor of every stage, and nothing else: a tensor the config does not explain is
  // refused before anything is written.
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, opt.stages);
  std::vector<model::ModelOptions> stage_options;
  std::set<std::string> used;
  for (int s = 0; s < opt.stages; ++s) {
    stage_options.push_back({.layers = ranges[std::size_t(s)], .lm_head = lm_head, .value_head = value_head,
                             .value_bias = value_bias});
    for (const model::TensorInfo& t : model::tensor_layout(cfg, stage_options.back())) used.insert(t.name);
  }
  for (const auto& [name, in_folder] : src.name_of) {
    if (used.count(name)) continue;
    if (name == "lm_head.weight" && cfg.tie_word_embeddings) {
      // Some folders keep a tied head's copy: it must be the embedding.
      const auto head = folder.holder(in_folder).read(in_folder);
      const auto embed = folder.holder(folder_name("model.embed_tokens.weight")).read(folder_name("model.embed_tokens.weight"));
      if (head != embed)
        throw InputError(where(name), in_folder, "differs from model.embed_tokens.weight, and tie_word_embeddings is true");
      continue;
    }
    throw InputError(where(name), in_folder,
                     fmt::format("a tensor {} does not explain (model_type \"{}\" with this config has no such tensor): "
                                 "refused rather than dropped",
                                 src.origin, model::model_type_of(cfg.family)));
  }
  if (!src.passed_over.empty())
    log::info("{}: {} tensor(s) that are not the model's parameters passed over (first: {})", hf_dir.string(),
              src.passed_over.size(), src.passed_over.front());

  std::vector<std::filesystem::path> written;
  std::vector<float> buf;
  Progress progress("import", used.size(), "tensors");
  for (int s = 0; s < opt.stages; ++s) {
    const model::ModelOptions& mo = stage_options[std::size_t(s)];
    io::WeightShardMeta meta;
    meta.model_config = src.config.dump();
    meta.layer_begin = mo.layers.begin;
    meta.layer_end = mo.layers.end;
    meta.has_embedding = s == 0;
    meta.has_head = s + 1 == opt.stages;
    meta.created_by = opt.created_by;
    meta.made_from = opt.made_from;
    const auto path = checkpoint::stage_path(out, s, opt.stages);
    io::WeightShardWriter w(path, meta);
    const bool tied_copy = s > 0 && cfg.tie_word_embeddings && mo.lm_head && s + 1 == opt.stages;
    for (const model::TensorInfo& t : model::tensor_layout(cfg, mo)) {
      if (tied_copy && t.name == "model.embed_tokens.weight") continue;  // stored once, with the first stage
      if (!has(t.name)) throw InputError(hf_dir.string(), t.name, "tensor missing from the safetensors files");
      const Shape shape = folder.shape(folder_name(t.name));
      if (shape != t.shape) {
        throw InputError(where(t.name), folder_name(t.name),
                         fmt::format("shape {} where config.json implies {}", io::shape_string(shape),
                                     io::shape_string(t.shape)));
      }
      buf.resize(static_cast<std::size_t>(numel(shape)));
      folder.read(folder_name(t.name), buf.data());
      w.add(t.name, t.shape, buf.data());
      progress.advance();
    }
    w.commit();
    written.push_back(path);
  }
  progress.finish();
  return written;
}

bool token_classification(const json& config, model::Family family, bool score_bias, ValueHeadClass choice,
                          const std::string& file) {
  const std::string stored = architecture_of(config);
  const bool token = choice == ValueHeadClass::token ||
                     (choice == ValueHeadClass::automatic &&
                      (ends_with(stored, "ForTokenClassification") ||
                       (!ends_with(stored, "ForSequenceClassification") && score_bias)));
  if (token && family == model::Family::gemma3)
    throw UsageError("a gemma3_text model has no token-classification class in transformers: export it with "
                     "--value-head sequence");
  if (!token && score_bias)
    throw InputError(file, "score.bias",
                     "a ...ForSequenceClassification head has no bias: export this value model with --value-head token");
  return token;
}

std::vector<std::filesystem::path> export_hf(const std::vector<std::filesystem::path>& shard_paths,
                                             const std::filesystem::path& out_dir, const ExportOptions& opt) {
  // A tensor-parallel checkpoint's slices are joined (every rank's files are needed).
  const checkpoint::WholeTensors shards(shard_paths);
  if (shards.kind() != "weights") {
    throw InputError(shards.file().string(), "kind", fmt::format("is \"{}\": only weight shards can be exported", shards.kind()));
  }
  const model::ModelConfig cfg = shards.config();
  if (shards.layer_begin() != 0 || shards.layer_end() != cfg.num_hidden_layers) {
    throw InputError(shard_paths.front().string(), "layer_end",
                     fmt::format("the files hold layers [{}, {}) of a {}-layer model: export needs them all",
                                 shards.layer_begin(), shards.layer_end(), cfg.num_hidden_layers));
  }
  json config = parse_json_text(shards.meta().model_config, shard_paths.front().string());
  const std::string prefix(model::class_prefix_of(cfg.family));

  // The class: a causal LM, or (a value head and no LM head) a reward or value model.
  const bool classifier = shards.contains("score.weight") && !shards.contains("lm_head.weight");
  const bool score_bias = shards.contains("score.bias");
  bool token = false;
  if (classifier) {
    token = token_classification(config, cfg.family, score_bias, opt.value_head, shard_paths.front().string());
    const std::string cls = token ? prefix + "ForTokenClassification"
                            : cfg.family == model::Family::gemma3 ? "Gemma3TextForSequenceClassification"
                                                                   : prefix + "ForSequenceClassification";
    config["architectures"] = {cls};
    // One label: transformers makes num_labels from id2label.
    config["id2label"] = {{"0", "LABEL_0"}};
    config["label2id"] = {{"LABEL_0", 0}};
    config.erase("num_labels");
  } else {
    config["architectures"] = {prefix + "ForCausalLM"};
  }
  config["torch_dtype"] = opt.dtype == StoreDtype::f32 ? "float32" : "bfloat16";
  if (config.contains("dtype")) config["dtype"] = config["torch_dtype"];  // transformers 5's name
  if (!config.contains("model_type")) config["model_type"] = model::model_type_of(cfg.family);

  // The tokenizer is checked before anything is written.
  std::unique_ptr<tok::Tokenizer> tk;
  std::filesystem::path tj = opt.tokenizer;
  if (!opt.tokenizer.empty()) {
    if (std::filesystem::is_directory(tj)) tj /= "tokenizer.json";
    tk = tok::load_tokenizer(tj.string());
    if (tk->vocab_size() > cfg.vocab_size) {
      throw InputError(tj.string(), "model.vocab",
                       fmt::format("the tokenizer has {} ids, more than the model's vocab_size {}", tk->vocab_size(),
                                   cfg.vocab_size));
    }
  }

  // Every file is written into a temporary folder beside out_dir and moved into it at the end:
  // a failure part way leaves nothing half-written there.
  AtomicFolder folder(out_dir);
  const std::filesystem::path& dir = folder.temp_path();
  SafetensorsWriter w(dir / "model.safetensors", opt.dtype);
  w.set_metadata("format", "pt");
  const auto names = shards.names();
  Progress progress("export", names.size(), "tensors");
  for (const std::string& name : names) {
    w.add(name, shards.shape(name), [&shards, &progress, name](float* dst) {
      const std::vector<float> v = shards.read(name);
      std::copy(v.begin(), v.end(), dst);
      progress.advance();
    });
  }
  // A value model braid trained without a bias: transformers' token-classification head has one.
  const float zero = 0.f;
  if (classifier && token && !score_bias) w.add("score.bias", {1}, &zero);
  w.commit();
  progress.finish();
  write_text_file((dir / "config.json").string(), config.dump(2) + "\n");
  std::vector<std::filesystem::path> written{dir / "config.json", dir / "model.safetensors"};

  if (!classifier) {
    write_text_file((dir / "generation_config.json").string(),
                    generation_config_json(config, tk.get(), opt.generation).dump(2) + "\n");
    written.push_back(dir / "generation_config.json");
  }
  if (tk) {
    for (auto& f : export_tokenizer_files(tj, *tk, dir, cfg.max_position_embeddings)) written.push_back(std::move(f));
  }
  folder.commit();
  for (auto& f : written) f = folder.final_of(f);
  return written;
}

}  // namespace braid::hf
