// Hugging Face model folders <-> braid weight shards.
//
// import: config.json + model.safetensors (or a sharded index) -> one shard per
//   pipeline stage (checkpoint/checkpoint.hpp's stage_path naming). F32, F16 and BF16
//   weights become float32. A causal LM brings lm_head.weight (or ties it); a
//   LlamaForSequenceClassification reward model brings score.weight [1, D] and no LM
//   head. Tensors braid has no use for (rotary inv_freq buffers) are skipped with a
//   warning; a missing or misshapen one is an InputError naming it.
// export: weight shards -> config.json + model.safetensors (F32 or BF16) and
//   generation_config.json in a folder, loadable by transformers'
//   LlamaForCausalLM.from_pretrained; optionally the tokenizer files too
//   (hf/export_tokenizer.hpp), so that the folder is complete.
//
// The config.json stored in the shards is the imported file's own text, so export
// gives back its extra keys (bos_token_id, torch_dtype, ...).
#pragma once

#include "hf/export_tokenizer.hpp"
#include "hf/safetensors.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace braid::hf {

struct ImportOptions {
  int stages = 1;
  std::string created_by;
};

// Returns the files written.
std::vector<std::filesystem::path> import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                                             const ImportOptions& opt = {});

struct ExportOptions {
  StoreDtype dtype = StoreDtype::f32;
  // A tokenizer.json (or a folder with one) to copy beside the weights, with the
  // tokenizer_config.json next to it if there is one; checked by loading it first.
  std::filesystem::path tokenizer;
  // The sampling generation_config.json says generate() should use.
  GenerationDefaults generation;
};

// Returns the files written.
std::vector<std::filesystem::path> export_hf(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& out_dir,
               const ExportOptions& opt = {});

}  // namespace braid::hf
