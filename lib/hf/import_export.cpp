#include "hf/import_export.hpp"

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "hf/hf_folder.hpp"
#include "hf/llama_layout.hpp"
#include "io/weight_shard.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <set>

namespace braid::hf {

std::vector<std::filesystem::path> import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                                             const ImportOptions& opt) {
  const HfFolder folder(hf_dir);
  const model::ModelConfig cfg = model::parse_config(folder.config(), folder.config_path().string());
  const bool value_head = folder.contains("score.weight");
  const bool lm_head = cfg.tie_word_embeddings || folder.contains("lm_head.weight");
  if (!lm_head && !value_head) {
    throw InputError(hf_dir.string(), "lm_head.weight",
                     "missing: the model has neither an LM head (lm_head.weight or tie_word_embeddings) nor a "
                     "value head (score.weight)");
  }
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, opt.stages);
  std::set<std::string> used;
  std::vector<std::filesystem::path> written;
  std::vector<float> buf;
  Progress progress("import", folder.names().size(), "tensors");
  for (int s = 0; s < opt.stages; ++s) {
    const model::ModelOptions mo{.layers = ranges[static_cast<std::size_t>(s)], .lm_head = lm_head, .value_head = value_head};
    io::WeightShardMeta meta;
    meta.model_config = folder.config().dump();
    meta.layer_begin = mo.layers.begin;
    meta.layer_end = mo.layers.end;
    meta.has_embedding = s == 0;
    meta.has_head = s + 1 == opt.stages;
    meta.created_by = opt.created_by;
    const auto path = checkpoint::stage_path(out, s, opt.stages);
    io::WeightShardWriter w(path, meta);
    for (const TensorSpec& t : llama_tensors(cfg, mo)) {
      if (!folder.contains(t.name)) throw InputError(hf_dir.string(), t.name, "tensor missing from the safetensors files");
      const Shape shape = folder.shape(t.name);
      if (shape != t.shape) {
        throw InputError(folder.holder(t.name).path().string(), t.name,
                         fmt::format("shape {} where config.json implies {}", io::shape_string(shape),
                                     io::shape_string(t.shape)));
      }
      buf.resize(static_cast<std::size_t>(numel(shape)));
      folder.read(t.name, buf.data());
      w.add(t.name, t.shape, buf.data());
      used.insert(t.name);
      progress.advance();
    }
    w.commit();
    written.push_back(path);
  }
  progress.finish();
  std::vector<std::string> unused;
  for (const auto& n : folder.names()) {
    if (!used.contains(n) && !(cfg.tie_word_embeddings && n == "lm_head.weight")) unused.push_back(n);
  }
  if (!unused.empty()) {
    log::warn("{}: {} tensor(s) braid does not use were skipped (first: {})", hf_dir.string(), unused.size(), unused.front());
  }
  return written;
}

std::vector<std::filesystem::path> export_hf(const std::vector<std::filesystem::path>& shard_paths,
                                             const std::filesystem::path& out_dir, const ExportOptions& opt) {
  const io::WeightShardSet shards(shard_paths);
  for (const auto& s : shards.shards()) {
    if (s.meta().kind != "weights") {
      throw InputError(s.path().string(), "kind", fmt::format("is \"{}\": only weight shards can be exported", s.meta().kind));
    }
    if (s.meta().tp_size != 1) {
      throw InputError(s.path().string(), "attribute tp_size",
                       fmt::format("is {}: a tensor-parallel slice; braid reshard --tp 1 joins the slices first",
                                   s.meta().tp_size));
    }
  }
  const model::ModelConfig cfg = checkpoint::config_of(shards);
  if (shards.layer_begin() != 0 || shards.layer_end() != cfg.num_hidden_layers) {
    throw InputError(shard_paths.front().string(), "layer_end",
                     fmt::format("the files hold layers [{}, {}) of a {}-layer model: export needs them all",
                                 shards.layer_begin(), shards.layer_end(), cfg.num_hidden_layers));
  }
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
  json config = parse_json_text(shards.shards().front().meta().model_config, shard_paths.front().string());
  config["torch_dtype"] = opt.dtype == StoreDtype::f32 ? "float32" : "bfloat16";
  if (!config.contains("architectures")) config["architectures"] = {"LlamaForCausalLM"};
  if (!config.contains("model_type")) config["model_type"] = "llama";

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
      shards.read(name, dst);
      progress.advance();
    });
  }
  w.commit();
  progress.finish();
  write_text_file((dir / "config.json").string(), config.dump(2) + "\n");
  std::vector<std::filesystem::path> written{dir / "config.json", dir / "model.safetensors"};

  write_text_file((dir / "generation_config.json").string(),
                  generation_config_json(config, tk.get(), opt.generation).dump(2) + "\n");
  written.push_back(dir / "generation_config.json");
  if (tk) {
    for (auto& f : export_tokenizer_files(tj, *tk, dir, cfg.max_position_embeddings)) written.push_back(std::move(f));
  }
  folder.commit();
  for (auto& f : written) f = folder.final_of(f);
  return written;
}

}  // namespace braid::hf
