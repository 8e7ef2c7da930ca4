// Model weights to and from HDF5 weight shards (io/weight_shard.hpp), by layer range.
//
// A checkpoint of S pipeline stages is S files, stage_path(out, i, S), each holding
// the tensors of its stage under Hugging Face names. Loading looks every tensor of
// the receiving model up in whichever file has it, so 4 stage files load into a
// model of 1 or 2 stages, and back.
//
// Tensor parallelism: a model split over tp ranks (model/tensor_parallel.hpp) saves its
// slices with tp_rank/tp_size set, each rank to tp_path(out, rank, size) (then split by
// stage: "ckpt.tp1-of-2.stage0-of-3.h5"). Loading takes the files of the model's own tp
// rank, or a whole (tp 1) checkpoint, of which each rank reads its slices; a checkpoint
// of another degree is read joined (checkpoint/whole_tensors.hpp), and `braid reshard
// --tp N` rewrites one at another degree once and for all.
//
// Tied embeddings: the last stage of a tied model keeps a copy of
// model.embed_tokens.weight as its LM head. Only the first stage writes it (one copy
// per checkpoint); a tied last stage loads it from the first stage's file.
#pragma once

#include "io/weight_shard.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace braid::checkpoint {

// Layers split as evenly as possible over `stages` (earlier stages take the extra ones).
std::vector<model::LayerRange> split_layers(int num_layers, int stages);

// out itself for one stage; "ckpt.h5" -> "ckpt.stage2-of-4.h5" for stage 2 of 4.
std::filesystem::path stage_path(const std::filesystem::path& out, int stage, int stages);
// out itself at tp 1; "ckpt.h5" -> "ckpt.tp1-of-2.h5" for tp rank 1 of 2.
std::filesystem::path tp_path(const std::filesystem::path& out, int rank, int size);
// The files of a checkpoint written with stage_path(out, *, stages).
std::vector<std::filesystem::path> stage_paths(const std::filesystem::path& out, int stages);
// Removes the files named like checkpoint `out` in another layout than the one just
// written (`written`: every file of it): out itself, its stage files and its tp files that
// are not in `written` — what an earlier run left under the same name, which a reader
// (preferring the whole file) would otherwise load. Returns what it removed. One rank
// calls it, once every file of `written` exists.
std::vector<std::filesystem::path> remove_other_layouts(const std::filesystem::path& out,
                                                        const std::vector<std::filesystem::path>& written);

struct SaveInfo {
  std::int64_t step = 0;
  std::string created_by;     // the command line
  std::string config_json;    // config.json text to store; "" = config_to_json(model config)
  std::string made_from;      // what made it (io/fingerprint.hpp), JSON text; "" = not recorded
  std::filesystem::path base; // LoRA adapters (checkpoint/adapters.hpp): the base checkpoint they apply to
};

// Writes the model's stage as one shard, atomically. Files hold f32 whatever the model's
// storage: a bf16 model writes its master copy (while an optimizer keeps one) or its bf16
// values widened.
void save_weights(const model::Model& m, const std::filesystem::path& path, const SaveInfo& info = {});

// InputError(file, tensor) when a weight of m (or of its LoRA adapters) is NaN or Inf (io/finite.hpp): a trainer
// calls it before writing anything of a checkpoint, so that a run whose weights
// diverged (a learning rate too high) leaves no file behind. `step` goes in the message.
void require_finite_weights(const model::Model& m, const std::filesystem::path& file, std::int64_t step);

// Fills every tensor of m from the shards (rounded to nearest even for a bf16 model). InputError (naming the file and tensor) when a
// tensor is missing, has another shape, or the shards' config differs from m's. The shards
// are those of m's tp rank, or of a whole (tp 1) checkpoint, whose tensors are read as m's
// slices; InputError naming tp_size for another degree.
void load_weights(model::Model& m, const io::WeightShardSet& shards);

// The same from a checkpoint of any tp degree (checkpoint/whole_tensors.hpp), each tensor
// joined from every rank's slice and cut again as the model's own slice.
class WholeTensors;
void load_weights(model::Model& m, const WholeTensors& whole);
// Whether `files` (a checkpoint's, checkpoint_files' answer) are of another tp degree than
// the model's and not whole: then each tensor is read joined (WholeTensors), not as a file.
bool needs_joining(const std::vector<std::filesystem::path>& files, const model::TensorParallel& tp);

// The model config the shards were written with (from the first shard).
model::ModelConfig config_of(const io::WeightShardSet& shards);

// Whether checkpoint_files(spec) finds files (without the error when it does not).
bool checkpoint_exists(const std::filesystem::path& spec);

// The record of what made a checkpoint (its first file's made_from attribute; "" when it
// has none). InputError as checkpoint_files and the reader.
std::string made_from_of(const std::filesystem::path& spec);

// The files of the checkpoint a user names: the file itself when it exists, else the
// stage files stage_path(spec, *, S) of one S (all S of them must exist), else the files
// of every rank of a tensor-parallel checkpoint, tp_path(spec, r, N) for r < N (each one
// file or its stage files). InputError naming spec when there is none of these, or when
// files are missing or of two splits or degrees.
std::vector<std::filesystem::path> checkpoint_files(const std::filesystem::path& spec);

// Of a checkpoint's files (checkpoint_files' answer), those a model at tp rank tp.rank
// of tp.size loads: all of them for a whole (tp 1) checkpoint, else those of its own
// rank, or rank 0's when the files are of another degree (which load_weights and
// load_optimizer_state then refuse, naming tp_size and `braid reshard`).
std::vector<std::filesystem::path> files_of_tp_rank(const std::vector<std::filesystem::path>& files,
                                                    const model::TensorParallel& tp);

// A model (or a pipeline stage of one: layers) built from the checkpoint's config and
// loaded from it. The heads follow the checkpoint: an LM head when it holds
// lm_head.weight or ties its embeddings, a value head when it holds score.weight (with its
// bias when it holds score.bias);
// `need_lm_head` / `need_value_head` make a missing one an InputError naming the file.
// dtype: the storage type of the model's weights (model::ModelOptions::dtype). tp: the
// model's tensor-parallel rank and group; it opens that rank's files of a tensor-parallel
// checkpoint of its degree, or slices a whole one, or joins the slices of a checkpoint
// of another degree and slices them again (so a tp 2 checkpoint opens in a tp 1 process).
struct OpenedModel {
  std::unique_ptr<model::Model> model;
  std::vector<std::filesystem::path> files;
  std::int64_t step = 0;       // the checkpoint's training step (first file's)
  std::string config_json;     // the stored config.json text
  std::filesystem::path base;  // with LoRA adapters: the base checkpoint (spec itself for fresh ones)
};
// LoRA (checkpoint/adapters.hpp): spec naming an adapter file opens its base with the file's
// adapters; `lora` of rank > 0 on a base checkpoint puts fresh adapters on it (B = 0: the
// base's outputs), and on an adapter file must match the file's options.
OpenedModel open_model(const std::filesystem::path& spec, backend::Backend& be, model::LayerRange layers = {},
                       bool need_lm_head = false, bool need_value_head = false,
                       backend::DType dtype = backend::DType::f32, model::TensorParallel tp = {},
                       const model::LoraOptions& lora = {});

}  // namespace braid::checkpoint
