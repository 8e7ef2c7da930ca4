// A decoder of any family of model/config.hpp (Llama, Mistral, Qwen2, Qwen3, Gemma 2 and 3)
// with explicit forward and backward passes per layer and preallocated activations, in the
// manner of llm.c (no autograd).
//
// A model (or a pipeline stage of one) owns its parameters and their gradients in
// one contiguous buffer each, viewed as tensors under Hugging Face names. The
// activations of one micro-batch live apart (Activations), so that a pipeline
// schedule can keep several micro-batches in flight on one stage.
//
// Training / scoring (packed batch of whole sequences, positions from 0):
//
//   Model m(cfg, {.layers = {0, cfg.num_hidden_layers}, .lm_head = true}, backend);
//   auto acts = m.make_activations({.max_tokens = 4096, .max_sequences = 16, .training = true});
//   m.forward({tokens, offsets}, acts);          // acts.output(): final hidden states (N × D)
//   ... rl::ChunkedLmHead / m.values() read acts.output() and accumulate into acts.output_grad()
//   m.backward(acts);                             // accumulates into the tensors' grad
//
// Pipeline stages: a stage built for layers [b, e) embeds tokens only when b == 0 and
// has the final norm and heads only when e == num_hidden_layers. Other stages read
// their input from acts.input() (the previous stage's output, written by the caller)
// and, after backward, leave the gradient for the previous stage in acts.input_grad().
//
// Tensor parallelism (model/tensor_parallel.hpp, docs/parallel.md): with
// ModelOptions::tp = {size, rank, group} the model holds rank's slices of the heads, MLP
// units and vocabulary, and forward, backward and forward_cached all-reduce over the
// group; every rank of the group runs the same calls on the same tokens.
//
// Generation (paged KV cache; continuous batching):
//
//   auto cache = m.make_kv_cache(/*slots*/ 32, /*max_len*/ 1024);
//   auto acts  = m.make_activations({.max_tokens = 2048, .max_sequences = 32});
//   m.forward_cached(tokens, {{slot 0, 12 tokens}, {slot 3, 1 token}}, cache, acts);
//   acts.logits()  // [segments × vocab]: logits at the last token of each segment (not kept by training activations)
//
// Each segment appends its tokens to its slot's cache at positions
// cache.length(slot) .. +len and attends to everything before; a segment of one token
// is a decode step, a longer one a prefill. Segments of different slots at different
// positions run in one batch. cache.clear(slot) frees a slot for a new sequence.
//
// The cache is paged (vLLM's PagedAttention): keys and values live in a pool of
// fixed-size blocks (KVCacheOptions::block_size tokens of every layer), each slot has a
// block table, and a slot takes blocks as its sequence grows and gives them back when it
// is cleared or truncated. A pool smaller than slots × max_len lets more sequences run
// than would fit at their longest; a step that needs more blocks than are free throws
// KVCacheFull before touching anything (a generator preempts a sequence instead:
// lib/generate). A fresh prompt (a segment starting at position 0) attends over its own
// keys with attention_forward (the flash kernel over packed prompts); every other row
// reads the cache through paged_attention (decode). The keys and values are written into
// their blocks with paged_kv_write in both cases.
#pragma once

#include "backend/backend.hpp"
#include "model/config.hpp"
#include "model/lora.hpp"
#include "model/tensor_parallel.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace braid::model {

// Layers [begin, end) of the full model; end = -1 means num_hidden_layers.
struct LayerRange {
  int begin = 0;
  int end = -1;
};

struct ModelOptions {
  LayerRange layers;
  bool lm_head = true;      // lm_head.weight (or the tied embedding) on the last stage
  bool value_head = false;  // score.weight [1 × D] on the last stage (critic, reward model)
  bool value_bias = false;  // score.bias [1] with the value head (transformers' ...ForTokenClassification)
  // Storage type of the weights the forward and backward read (the compute copy): the
  // model's scalar type (f32; f64 for a double model), or bf16 (half the weight memory; gradients stay f32, and
  // an optimizer keeps an f32 master copy: optim::AdamW).
  backend::DType dtype = backend::DType::f32;
  // Tensor parallelism (model/tensor_parallel.hpp): this rank's slice of the heads, the MLP
  // units and the vocabulary; tensors are then shaped as the slices.
  TensorParallel tp;
  // LoRA adapters on the linear layers (model/lora.hpp); the base is then frozen.
  LoraOptions lora;
};

// One parameter tensor, by Hugging Face name ("model.layers.3.self_attn.q_proj.weight",
// "model.layers.3.self_attn.q_proj.bias", "model.layers.3.self_attn.q_norm.weight",
// "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "score.weight").
// data, grad and weights are device memory of the model's backend (host memory on the CPU
// backend).
//
// Mixed precision is a property of the tensor: `weights` is the compute copy the forward
// and backward read, stored as `dtype`. When dtype is T's own type, data == weights. When
// it is narrower (bf16), data is the T master copy an optimizer keeps while it trains the
// model (optim::AdamW), and nullptr otherwise: a model that only runs holds no wide copy.
// Read and write values with read_values / write_values, which handle both.
template <typename T>
struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;   // as in PyTorch: [out, in] for a linear layer
  T* data = nullptr;
  T* grad = nullptr;
  std::int64_t numel = 0;
  int layer = -1;                    // decoder layer index, -1 for embedding, norm, heads
  backend::DType dtype = backend::dtype_of<T>();
  void* weights = nullptr;
  // Under tensor parallelism: the tensor's shape in the whole model and where this slice
  // lies in it (shape == full_shape and slice replicated at tp 1).
  std::vector<std::int64_t> full_shape;
  TpSlice slice;

  backend::Weights operand() const { return {weights, dtype}; }
};

// The tensor's values as T into host[numel]: the master copy when there is one, else the
// compute copy widened.
template <typename T>
void read_values(backend::Backend& be, const Tensor<T>& t, T* host);
// Sets the tensor's values from host[numel]: the master copy (when there is one) takes them
// as they are, the compute copy rounded to its dtype (nearest even).
template <typename T>
void write_values(backend::Backend& be, Tensor<T>& t, const T* host);
// The whole tensor (full_shape, as at tp 1) of which t is this rank's slice: t's values and
// every other tp rank's slice of it, gathered over `tp`'s group (collective: every rank of
// the group calls it for the same tensor and gets the whole). read_values at tp 1 and for a
// replicated tensor.
template <typename T>
std::vector<T> whole_values(backend::Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                            const Tensor<T>& t);

// A packed batch: sequence s is tokens[offsets[s] .. offsets[s+1]). Stages after the
// first need only offsets.
// LoRA dropout's draw for one training forward (LoraOptions::dropout > 0): a key per
// sequence (what it is, not where it sits: the same sequence draws the same mask however the
// batch is cut) and the seed of this draw (the run's, mixed with the optimizer step).
struct DropoutDraw {
  std::span<const std::uint64_t> sequence_keys;
  std::uint64_t seed = 0;
};

struct Batch {
  std::span<const std::int32_t> tokens;
  std::span<const std::int64_t> offsets;
  // A training forward of a model whose adapters have dropout: its draw (the backward of
  // this forward masks alike). nullptr: no dropout (scoring, generation, evaluation).
  const DropoutDraw* dropout = nullptr;
};

// A run of new tokens for one KV-cache slot.
struct Segment {
  int slot = 0;
  std::int64_t len = 0;
};

struct ActivationOptions {
  std::int64_t max_tokens = 0;     // tokens in one forward (all sequences/segments)
  std::int64_t max_sequences = 1;  // sequences (forward) or segments (forward_cached)
  std::int64_t max_seq_len = 0;    // longest key run attention sees; 0: max_position_embeddings
  bool training = false;           // keep every layer's activations for backward
  // Training: 0 keeps every layer's activations; k >= 1 keeps only the inputs of the layers
  // whose index in the whole model is a multiple of k, and backward recomputes their
  // forward (into one shared slot) just before it goes back through them (k = 1: every
  // layer). The results are the same bits on a deterministic backend.
  int recompute = 0;
};

// Whether layer `layer` (its index in the whole model) is recomputed under recompute = k.
inline bool recomputed_layer(int layer, int recompute) { return recompute > 0 && layer % recompute == 0; }

// A paged KV cache's shape (make_kv_cache).
struct KVCacheOptions {
  int slots = 1;                   // sequences at once (block-table rows)
  std::int64_t max_len = 0;        // tokens of one sequence at most (<= max_position_embeddings)
  int block_size = 16;             // tokens per block
  std::int64_t blocks = 0;         // blocks in the pool; 0: slots · ⌈max_len / block_size⌉ (never full)
  // Storage of keys and values: the model's scalar type, or bf16 (half the memory; keys and
  // values rounded once when written). f32 when the model's type is f32 and this says f32.
  backend::DType dtype = backend::DType::f32;
};

// A step needs more blocks than the pool has free (nothing was changed).
class KVCacheFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename T> class BasicModel;

// The buffers of one micro-batch. Made by BasicModel::make_activations, reused across calls.
template <typename T>
class BasicActivations {
 public:
  ~BasicActivations();
  BasicActivations(BasicActivations&&) noexcept;
  BasicActivations& operator=(BasicActivations&&) noexcept;

  std::int64_t tokens() const;                 // rows of the last forward
  int hidden_size() const;
  // Stage input (N × D): written by the caller before forward on stages after the first.
  T* input();
  // Stage output (N × D): the final-norm hidden states on the last stage, the residual
  // stream otherwise.
  const T* output() const;
  // Gradient w.r.t. output (N × D): zeroed by forward (training); heads or the next
  // stage's input_grad go here before backward.
  T* output_grad();
  // Gradient w.r.t. input (N × D) after backward, on stages after the first.
  const T* input_grad() const;
  // forward_cached on the last stage with an LM head: [segments × vocab].
  const T* logits() const;
  T* logits();

  struct Impl;  // internal: model/model_impl.hpp

 private:
  friend class BasicModel<T>;
  explicit BasicActivations(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Keys and values of every layer of the stage, for `slots` sequences of up to max_len
// tokens, in a pool of blocks (paged; see the header comment).
template <typename T>
class BasicKVCache {
 public:
  ~BasicKVCache();
  BasicKVCache(BasicKVCache&&) noexcept;
  BasicKVCache& operator=(BasicKVCache&&) noexcept;

  int slots() const;
  std::int64_t max_len() const;
  std::int64_t length(int slot) const;   // tokens cached for the slot
  void clear(int slot);                  // forget the slot's tokens; its blocks go back to the pool
  // Keeps the first len tokens of the slot (len <= length): rewinds a speculative step.
  void truncate(int slot, std::int64_t len);

  int block_size() const;
  std::int64_t blocks() const;           // in the pool
  std::int64_t free_blocks() const;
  std::int64_t held_blocks(int slot) const;
  // Blocks the slot would take from the pool to append `tokens` more tokens.
  std::int64_t blocks_needed(int slot, std::int64_t tokens) const;
  backend::DType dtype() const;
  std::int64_t bytes() const;            // the pool's device memory

  struct Impl;  // internal: model/model_impl.hpp

 private:
  friend class BasicModel<T>;
  explicit BasicKVCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

template <typename T>
class BasicModel {
 public:
  BasicModel(const ModelConfig& cfg, const ModelOptions& opt, backend::Backend& be);
  ~BasicModel();
  BasicModel(BasicModel&&) noexcept;
  BasicModel& operator=(BasicModel&&) noexcept;

  const ModelConfig& config() const;
  const ModelOptions& options() const;
  backend::Backend& backend() const;
  int layer_begin() const;
  int layer_end() const;
  bool is_first_stage() const;   // has the token embedding
  bool is_last_stage() const;    // has the final norm and the heads
  const TensorParallel& tensor_parallel() const;   // options().tp
  // The vocabulary rows [begin, end) this rank's embedding and LM head hold ([0, V) at tp 1).
  std::pair<std::int64_t, std::int64_t> vocab_slice() const;

  // Every parameter of the stage, in a fixed order (embedding, layers, norm, heads).
  std::vector<Tensor<T>>& tensors();
  const std::vector<Tensor<T>>& tensors() const;
  Tensor<T>* find(const std::string& hf_name);   // nullptr if the stage has no such tensor
  // All parameters / gradients as one contiguous array (optimizer, all-reduce).
  // parameters() is for models stored in T (std::logic_error otherwise).
  std::span<T> parameters();
  std::span<T> gradients();
  std::int64_t parameter_count() const;
  backend::DType dtype() const;                 // storage type of the weights (options().dtype)

  // LoRA (options().lora): each adapter's A [rank × in] and B [out × rank], named as the layer
  // with lora_A / lora_B ("model.layers.3.self_attn.q_proj.lora_A.weight"), layer by layer in
  // lora_modules()' order, back to back in one buffer of T with their own gradients (an
  // optimizer over them alone trains the adapters); then, with LoraOptions::value_head, the
  // value head's trained copy under the base's names (score.weight, score.bias), which the
  // model reads instead of the base's while the adapters are on. Empty without adapters.
  // Under tp each adapter is this rank's slice, cut as the matrix it adapts
  // (model/tensor_parallel.hpp): full_shape and slice say where it lies.
  // With adapters the base is frozen: backward leaves the base's gradients undefined and
  // computes the adapters' and the input's.
  std::vector<Tensor<T>>& adapters();
  // The adapters' gradients as one contiguous array, in adapters() order (empty without).
  std::span<T> adapter_gradients();
  // A uniform in ±1/√in (PEFT's default), B zero (so the adapted model starts as the base),
  // or B normal(0, b_std) when b_std > 0; the value head's copy the base's head. The same
  // seed gives the same adapters whatever the stage and tp split.
  void init_adapters(std::uint64_t seed, double b_std = 0);
  // Off: the forward is the base model's alone (a LoRA run's reference model).
  void set_adapters_enabled(bool on);
  bool adapters_enabled() const;
  // W += s·B·A into each adapted base weight (rounded to its dtype), the value head's copy
  // into the base's head, then the adapters off.
  void merge_adapters();
  // Bytes of the compute copy of the weights: parameter_count() · size of dtype().
  std::int64_t parameter_bytes() const;

  // Normal(0, std) for matrices (std = 0.02, HF's initializer_range), a gain of one for
  // norms (stored as 0 where the family's norms compute 1 + w), zeros for biases; the same
  // seed gives the same weights for a tensor whatever the stage and tp split.
  void init_random(std::uint64_t seed, double std = 0.02);
  void zero_grad();

  BasicActivations<T> make_activations(const ActivationOptions& opt) const;
  // A cache that never fills: every slot can hold max_len tokens (blocks of 16, type T).
  BasicKVCache<T> make_kv_cache(int slots, std::int64_t max_len) const;
  BasicKVCache<T> make_kv_cache(const KVCacheOptions& opt) const;
  // Device memory of one block of the stage's cache (keys and values of every layer).
  std::int64_t kv_block_bytes(int block_size, backend::DType dtype) const;

  // Forward over whole sequences (positions 0..len-1 each). Tokens are used on the first
  // stage; later stages read acts.input().
  void forward(const Batch& batch, BasicActivations<T>& acts) const;
  // Backward of the last forward of acts (training activations): reads acts.output_grad(),
  // accumulates into every tensor's grad, leaves acts.input_grad() on later stages.
  void backward(BasicActivations<T>& acts);

  // Appends each segment's tokens to its cache slot and runs them; on the last stage with an
  // LM head, acts.logits() then holds the logits of each segment's last token. Tokens are
  // packed in segment order (used on the first stage; later stages read acts.input()).
  void forward_cached(std::span<const std::int32_t> tokens, std::span<const Segment> segments,
                      BasicKVCache<T>& cache, BasicActivations<T>& acts) const;
  // forward_cached in two halves, for a caller that captures the second as a graph
  // (lib/generate/decode_graph.hpp). prepare_cached does the host's part: the checks, the
  // blocks the segments take, and the step's token ids, positions, cache slots and block
  // tables uploaded into fixed device buffers of acts and cache (the cache's lengths then
  // count the new tokens). run_cached issues only device work; when every segment is a
  // single decode token and the model is not tensor parallel it allocates nothing and never
  // waits for the device, so it can be captured. pad_to > number of segments (all single
  // tokens): the step has pad_to rows, the extra ones inert (token 0, no key written,
  // attention skipped, their logits ignored), so one graph serves every batch up to pad_to.
  void prepare_cached(std::span<const std::int32_t> tokens, std::span<const Segment> segments,
                      BasicKVCache<T>& cache, BasicActivations<T>& acts, std::int64_t pad_to = 0) const;
  void run_cached(BasicKVCache<T>& cache, BasicActivations<T>& acts) const;

  // Heads (last stage). The LM head matrix [vocab × D] (lm_head.weight or, tied, the
  // embedding), with its storage type; false when the stage has none.
  backend::Weights lm_head_weight() const;
  // Its gradient; nullptr for a frozen base (LoRA), whose head gets none.
  T* lm_head_grad();
  // logits[rows × vocab] = hidden[rows × D] · Wᵀ, soft-capped where the config says
  // (final_logit_softcapping; under tp: every rank's vocabulary slice, gathered; every rank
  // gets the whole rows).
  void lm_logits(const T* hidden, std::int64_t rows, T* logits) const;
  // Per-token scalar values of the value head (plus its bias), values[N], from acts.output().
  void values(const BasicActivations<T>& acts, T* values) const;
  // Accumulates the value head's backward into acts.output_grad() and score's gradients.
  void values_backward(BasicActivations<T>& acts, const T* d_values);

  struct Impl;  // internal: model/model_impl.hpp

 private:
  std::unique_ptr<Impl> impl_;
};

using Model = BasicModel<float>;
using Activations = BasicActivations<float>;
using KVCache = BasicKVCache<float>;

// Parameters of a stage of the model, as BasicModel would hold them.
std::int64_t parameter_count(const ModelConfig& cfg, const ModelOptions& opt);
// Parameters of the stage's LoRA adapters (opt.lora; 0 without; with the value head's
// trained copy), and the columns of x·Aᵀ a
// token keeps per layer (rank × adapters of a layer).
std::int64_t adapter_count(const ModelConfig& cfg, const ModelOptions& opt);
std::int64_t adapter_columns(const ModelOptions& opt);
// Under tp (opt.tp.size > 1): the parameters of the stage's replicated adapters (A of
// q/k/v/gate/up, B of o/down), whose gradient parts the backward keeps apart until it sums
// them over the tp group; 0 at tp 1.
std::int64_t adapter_partial_count(const ModelConfig& cfg, const ModelOptions& opt);
// A frozen base's (opt.lora) gradient buffer: elements of the one scratch that what its
// backward still writes goes to (the norms' gains, the value head: the largest vector of the
// stage), never read.
std::int64_t frozen_gradient_scratch(const ModelConfig& cfg, const ModelOptions& opt);

// The tensors of a stage as BasicModel would hold them, without building it: Hugging Face
// names, this tp rank's shapes and the whole model's, in storage order (import and export
// stream a model tensor by tensor from this list).
struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;        // this tp rank's slice
  int layer = -1;
  std::vector<std::int64_t> full_shape;   // at tp 1
  TpSlice slice;
};
std::vector<TensorInfo> tensor_layout(const ModelConfig& cfg, const ModelOptions& opt);
// The stage's LoRA adapters (opt.lora) as adapters() would hold them, without building the
// model: "<module>.lora_A.weight" [rank × in], "<module>.lora_B.weight" [out × rank], then
// the value head's copy, in storage order (none without adapters). What an adapter file must
// hold (`braid check`).
std::vector<TensorInfo> adapter_layout(const ModelConfig& cfg, const ModelOptions& opt);

}  // namespace braid::model
