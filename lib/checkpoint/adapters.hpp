// LoRA adapter checkpoints (model/lora.hpp): a model's adapters in one weight shard of kind
// "adapters", apart from the base they apply to. Its adapter_config attribute holds their
// options and the base checkpoint, as JSON text:
//
//   {"base": "policy.h5", "r": 8, "lora_alpha": 16, "use_rslora": false,
//    "target_modules": ["q_proj", "k_proj", ...], "modules_to_save": ["score"], "lora_dropout": 0.05}
//
// lora_dropout (when not 0): the dropout the adapters train with (model::LoraOptions::dropout).
//
// modules_to_save (a reward model's or critic's adapters): the file holds the value head
// trained in full (score.weight, score.bias where the base has one), which replaces the
// base's while the adapters are on (model::LoraOptions::value_head).
//
// "base" is relative to the adapter file's folder (or absolute). open_model (checkpoint.hpp)
// given an adapter file opens its base with those adapters on, so that every tool that opens
// a checkpoint runs the adapted model; a trainer writes the next adapter file naming the same
// base. The tensors are named as the model's adapters() ("model.layers.0.self_attn.q_proj.
// lora_A.weight" [r × in], "...lora_B.weight" [out × r]); PEFT's names add "base_model.model.".
#pragma once

#include "checkpoint/checkpoint.hpp"
#include "io/fingerprint.hpp"
#include "core/json.hpp"
#include "model/model.hpp"

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace braid::checkpoint {

// The tensors a trainer updates: the adapters under LoRA, else every tensor.
std::vector<model::Tensor<float>>& trained_tensors(model::Model& m);
const std::vector<model::Tensor<float>>& trained_tensors(const model::Model& m);

struct AdapterFile {
  std::filesystem::path path;   // the adapter file
  std::filesystem::path base;   // its base checkpoint, resolved against the file's folder
  model::LoraOptions lora;
  std::int64_t step = 0;
};

// The adapter file's header when spec names one (a file of kind "adapters"); nullopt for any
// other checkpoint. InputError naming the file and the key when its adapter_config is bad.
std::optional<AdapterFile> read_adapter_file(const std::filesystem::path& spec);

// Records the checkpoint `spec` as the input `role` of m (its files by content) and, when it
// is an adapter file, its base as `role base`: the adapters alone do not make the model.
void add_checkpoint_input(io::MadeFrom& m, const std::string& role, const std::filesystem::path& spec);
// The adapter_config of adapters of these options on `base` (as the file names it).
json adapter_config(const model::LoraOptions& lora, const std::filesystem::path& base);

// One adapter tensor, whole (as at tp 1): its name, shape and values.
struct AdapterTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};
// m's adapters whole, in adapters() order: under tp each gathered from every rank's slice
// (collective over m's tp group; every rank gets them).
std::vector<AdapterTensor> whole_adapters(const model::Model& m);
// An adapter file of LoRA options `lora` on `base` holding `tensors` (layers `layers` of the
// model whose config.json text is info.config_json), atomically; as save_adapters below, which
// it writes for one model; a pipeline's stages write theirs gathered into one.
void write_adapter_file(const std::filesystem::path& path, const model::LoraOptions& lora,
                        const std::filesystem::path& base, const SaveInfo& info, model::LayerRange layers,
                        std::span<const AdapterTensor> tensors);

// Writes m's adapters (f32) as one shard of kind "adapters", atomically, naming `base`
// relative to path's folder (as given where no relative path leads there). Refuses non-finite
// values (InputError naming the file and the tensor; nothing written). Under tensor
// parallelism the file holds the whole adapters, the file a tp 1 run writes: collective over
// m's tp group (each adapter's slices gathered), tp rank 0 writes. `write` false: nothing
// done (data parallel: the tp groups of the devices that do not write).
void save_adapters(const model::Model& m, const std::filesystem::path& path, const std::filesystem::path& base,
                   const SaveInfo& info = {}, bool write = true);

// Fills m's adapters from an adapter file (under tp each rank its slices); InputError naming
// the file and the tensor when one is missing or of another shape, or when its options or
// model config differ from m's.
void load_adapters(model::Model& m, const AdapterFile& file);

}  // namespace braid::checkpoint
