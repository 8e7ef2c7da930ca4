// Device memory a run will take, predicted before it loads anything, and the refusal
// when the device has less free (docs/memory.md).
//
// The figures are those of braid's engine as it allocates, not a generic estimate:
//
//   weights       parameter_count · size of --dtype (the compute copy)
//   gradients     parameter_count · 4 (f32, one contiguous buffer; every model has one,
//                 a model that only scores too)
//   rotary tables max_position_embeddings · head_dim · 4 (cos and sin; twice for gemma3's
//                 sliding layers' own RoPE)
//   optimizer     AdamW: two f32 moments, plus an f32 master copy when the weights are bf16
//                 (LoRA: two moments of each f32 adapter parameter, the base frozen)
//   adapters      LoRA: adapter parameters · 8 (f32 values and gradients); per token and
//                 slot rank · adapters of a layer, and rank more in training
//   activations   model::make_activations of the largest micro-batch (lib/model/activations.cpp):
//                 per token and layer (training keeps every layer, scoring one slot; with
//                 recompute k the layers not recomputed and one shared slot, and the residual
//                 per token and layer D + one D per slot)
//                 2D (residual, training; D scoring) + 2D (norms) + 2 (rstd) + qkv + H·hd
//                 (attention out) + H (log-sum-exp) + 3I (gate, up, SwiGLU out), in f32; then
//                 the last stage's D + 1 per token, D + vocab (LM head) per sequence, and in
//                 training the backward's 3D + qkv + H·hd + 3I per token; q/k norms (qwen3,
//                 gemma3): qkv (training) + H + KV per token and layer; Gemma's norms after
//                 attention and the MLP: 2D + 2 per token and layer, D per token (and D more
//                 in training); biases: 1 per token (a column of ones)
//   LM-head chunk rl::ChunkedLmHead: chunk_rows · vocab logits (twice with a final
//                 soft-cap) + 3 · chunk_rows, in f32
//   loss rows     the objective's per-token device arrays (f32 or i32; each grows to at most
//                 twice the largest micro-batch)
//
// Outside the prediction: the backend's per-stream scratch (cuBLASLt's workspace, operands
// rounded to bf16 for a product, attention's row sums), which CUDA's memory_stats do not
// count as live either, and what the CUDA context itself takes (not in "free").
#pragma once

#include "backend/backend.hpp"
#include "model/config.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braid::memory {

// One named share of a prediction ("actor activations (4096 tokens)").
struct Part {
  std::string name;
  std::uint64_t bytes = 0;
};

struct Prediction {
  std::vector<Part> parts;

  void add(std::string name, std::uint64_t bytes) { parts.push_back({std::move(name), bytes}); }
  void append(const Prediction& other);
  std::uint64_t total() const;
  // "actor weights (bf16) 2.05 GiB, actor gradients (f32) 4.10 GiB, …" (parts of 0 bytes left out).
  std::string describe() const;
};

// A model as a run will hold it: its config and the options it is built with.
struct ModelSpec {
  std::string role;            // "actor", "critic", "reference", "reward", "policy"
  model::ModelConfig config;
  model::ModelOptions options;
};

// The largest micro-batch a model pass holds at once.
struct MicroBatchShape {
  std::int64_t tokens = 0;
  std::int64_t sequences = 0;
};

// ---- the pieces, each the bytes the engine allocates for it ---------------------------
// Weights (compute copy), f32 gradients and rotary tables of a model.
Prediction model_bytes(const ModelSpec& m);
// AdamW's state for a model (moments, and the master copy of bf16 weights).
std::uint64_t adamw_bytes(const ModelSpec& m);
// model::BasicModel<float>::make_activations(opt) of this model.
std::uint64_t activation_bytes(const model::ModelConfig& cfg, const model::ModelOptions& mopt,
                               const model::ActivationOptions& opt);
// rl::ChunkedLmHead<float> of chunk_rows rows over the whole vocabulary.
std::uint64_t lm_head_chunk_bytes(const model::ModelConfig& cfg, std::int64_t chunk_rows);

// ---- whole runs ------------------------------------------------------------------------
// One model a training run updates (a Trainer: model, AdamW, activations sized to
// --micro-tokens tokens and as many sequences, its objective's head and rows).
struct TrainedModel {
  ModelSpec model;
  std::int64_t lm_head_chunk_rows = 0;   // 0: the objective uses no LM head
  int loss_rows = 0;                     // per-token device arrays of the objective
};
// The models trained together (PPO: actor and critic, both resident), micro_tokens each.
// recompute: model::ActivationOptions::recompute (--recompute).
Prediction predict_training(const std::vector<TrainedModel>& models, std::int64_t micro_tokens, int recompute = 0);

// One model a scoring run passes over (braid-score's reference, critic, reward model; or
// DPO's reference before training): model, inference activations of the largest
// micro-batch, the LM-head chunk when it has one, and its per-token output rows.
struct ScoredModel {
  ModelSpec model;
  std::int64_t lm_head_chunk_rows = 0;   // 0: no LM-head pass (a value head)
  int output_rows = 1;
  bool count_model = true;               // false: the model is counted elsewhere (a policy scored by itself)
};
// The rows of rl::ChunkedLmHead's default chunk on `be` (rl::default_chunk_rows: 128 on the
// host, up to 2048 on a GPU), which the scoring passes, the objectives and DPO's reference
// pass use (tests/memory checks the predictions against what they allocate).
std::int64_t lm_head_chunk_rows(const backend::Backend& be, const model::ModelConfig& cfg);
Prediction predict_scoring(const std::vector<ScoredModel>& models, MicroBatchShape largest);

// ---- before loading ----------------------------------------------------------------------
// The model a checkpoint (a file, stage files or tp files, as checkpoint::open_model takes
// them) would be built as, from its config and tensor names alone: no weight is read.
// An adapter file: its base with the file's adapters; `lora`: adapters put on a base.
ModelSpec peek_checkpoint(const std::string& spec, const std::string& role, backend::DType dtype,
                          const model::LoraOptions& lora = {});

// InputError("--device NAME", "device memory", …) naming every part of `p`, its total, the
// free memory and `advice` (what to change) when p.total() > mem.free; nothing otherwise.
void require_fits(const Prediction& p, const backend::DeviceMemory& mem, const std::string& device,
                  const std::string& advice);
// The check against the backend's free memory, where it reports one (a GPU); nothing on the
// CPU, whose memory the operating system manages. Logs the prediction (info level).
void require_fits(const Prediction& p, const backend::Backend& be, const std::string& device,
                  const std::string& advice);

// The largest total of live allocations the backend has seen (CUDA); nullopt elsewhere.
std::optional<std::uint64_t> device_peak(backend::Backend& be);
// Logs the peak beside the prediction where the backend reports a peak ("device memory:
// peak X GiB, predicted Y GiB").
void log_peak(backend::Backend& be, const Prediction& p);

}  // namespace braid::memory
