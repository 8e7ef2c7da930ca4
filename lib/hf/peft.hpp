// LoRA adapters <-> PEFT adapter folders (the layout peft's save_pretrained writes and
// PeftModel.from_pretrained reads):
//
//   adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "use_rslora",
//                               "target_modules", "lora_dropout", "bias": "none",
//                               "task_type": "CAUSAL_LM", "base_model_name_or_path", ...}
//   adapter_model.safetensors  "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
//                              [r × in], "...lora_B.weight" [out × r], F32
//
// A reward model's or critic's adapters add their value head, trained in full:
// "modules_to_save": ["score"], task_type "SEQ_CLS" (a reward model) or "TOKEN_CLS" (a value
// model), and the head as PEFT saves it, "base_model.model.score.weight" [1 × D] (and
// "...score.bias" [1] where the base has one).
//
// export_peft writes a braid adapter file (checkpoint/adapters.hpp) as such a folder;
// import_peft reads one onto a braid base checkpoint as an adapter file naming it.
#pragma once

#include "core/json.hpp"
#include "hf/import_export.hpp"
#include "model/lora.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace braid::hf {

// The PEFT name of a braid adapter tensor, and back ("" when the name is not one).
std::string peft_tensor_name(const std::string& braid_name);
std::string braid_adapter_name(const std::string& peft_name);

// Returns the files written. base_model_name_or_path is the adapter file's base checkpoint,
// as it names it; value_head: a value model's task type (as export_hf's class, ExportOptions).
std::vector<std::filesystem::path> export_peft(const std::filesystem::path& adapter_file,
                                               const std::filesystem::path& out_dir,
                                               ValueHeadClass value_head = ValueHeadClass::automatic);

// The adapter file's base with the adapters merged into its weights (W + s·B·A, on the CPU),
// exported as export_hf does a checkpoint. Returns the files written.
std::vector<std::filesystem::path> export_merged(const std::filesystem::path& adapter_file,
                                                 const std::filesystem::path& out_dir, const ExportOptions& opt = {});

// adapter_config.json read (cfile names it in errors): LoRA's rank, alpha, rsLoRA and modules;
// InputError naming the key where it is not one braid's adapters can be, or not of its type.
model::LoraOptions parse_adapter_config(const json& cfg, const std::string& cfile);

// A PEFT folder (LoRA, no bias, no per-module ranks, no module saved but the value head) onto
// `base`, a braid checkpoint of the model it adapts: each adapter's shape checked against the
// base tensor it adapts (headers only); a value head's bias the file lacks is the base's.
// InputError naming the file and the key or tensor otherwise. Returns the adapter file written.
std::filesystem::path import_peft(const std::filesystem::path& peft_dir, const std::filesystem::path& base,
                                  const std::filesystem::path& out, const std::string& created_by = "",
                                  const std::string& made_from = "");

}  // namespace braid::hf
