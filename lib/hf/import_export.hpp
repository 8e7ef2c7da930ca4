// Hugging Face model folders <-> braid weight shards, for every family braid runs
// (model/config.hpp, docs/models.md).
//
// import: config.json + model.safetensors (or a sharded index) -> one shard per
//   pipeline stage (checkpoint/checkpoint.hpp's stage_path naming). F32, F16 and BF16
//   weights become float32. A causal LM brings lm_head.weight (or ties it); a
//   ...ForSequenceClassification reward model brings score.weight [1, D] and no LM head, a
//   ...ForTokenClassification value model score.weight and score.bias [1]. A
//   Gemma3ForConditionalGeneration folder gives its text model (text_config, the language
//   model's tensors; the vision tower's are passed over). Every tensor of the folder must be
//   one the config explains: one the model holds, a rotary inv_freq buffer, or the vision
//   part of a Gemma 3; any other (a bias or q_norm the config does not declare, a second
//   head) is refused, naming it, rather than dropped. A missing or misshapen tensor is an
//   InputError naming it.
// export: weight shards -> config.json + model.safetensors (F32 or BF16) in a folder,
//   loadable by transformers: a causal LM as <Family>ForCausalLM with generation_config.json
//   (and the tokenizer files when given: hf/export_tokenizer.hpp); a model with a value head
//   and no LM head as <Family>ForSequenceClassification (a reward model) or
//   <Family>ForTokenClassification (a value model), with the num_labels (1) transformers
//   needs.
//
// The config.json stored in the shards is the imported file's own text, so export
// gives back its extra keys (bos_token_id, torch_dtype, ...).
#pragma once

#include "hf/export_tokenizer.hpp"
#include "hf/safetensors.hpp"
#include "model/config.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace braid::hf {

struct ImportOptions {
  int stages = 1;
  std::string created_by;
  std::string made_from;  // the outputs' made_from record (io/fingerprint.hpp), JSON text
};

// Returns the files written.
std::vector<std::filesystem::path> import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                                             const ImportOptions& opt = {});

// How a model with a value head and no LM head is exported: transformers'
// ...ForSequenceClassification (the reward model's score at a sequence's last token) or
// ...ForTokenClassification (a score per token, with a bias). automatic: the class the
// stored config.json names, else token where the checkpoint has score.bias, else sequence.
enum class ValueHeadClass { automatic, sequence, token };

struct ExportOptions {
  StoreDtype dtype = StoreDtype::f32;
  // A tokenizer.json (or a folder with one) to copy beside the weights, with the
  // tokenizer_config.json next to it if there is one; checked by loading it first.
  std::filesystem::path tokenizer;
  // The sampling generation_config.json says generate() should use.
  GenerationDefaults generation;
  ValueHeadClass value_head = ValueHeadClass::automatic;
};

// Whether a model with a value head and no LM head (config: its config.json) exports as
// ...ForTokenClassification, else ...ForSequenceClassification, as `choice` says.
// UsageError where the family has no such class, InputError naming `file` and score.bias
// where a sequence head would drop a bias.
bool token_classification(const json& config, model::Family family, bool score_bias, ValueHeadClass choice,
                          const std::string& file);

// Returns the files written.
std::vector<std::filesystem::path> export_hf(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& out_dir,
               const ExportOptions& opt = {});

}  // namespace braid::hf
