// Internal: the state behind BasicModel, BasicActivations and BasicKVCache, shared by
// the files that implement construction, forward, cached forward and backward.
#pragma once

#include "model/model.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

namespace braid::model {

// One decoder layer's weights (P = backend::Weights: the typed compute copy) or gradients
// (P = T*) inside the contiguous buffers. q|k|v and gate|up are adjacent tensors, so each
// pair is one fused matrix (and their biases one fused bias). Pieces a family does not have
// stay null.
template <typename P>
struct LayerWeights {
  P ln1{};           // input_layernorm [D]
  P qkv{};           // q_proj, k_proj, v_proj stacked: [(H + 2KV)·hd × D]
  P qkv_bias{};      // their biases stacked: [(H + 2KV)·hd]
  P q_norm{};        // q_norm, k_norm: each head's RMSNorm gain [hd]
  P k_norm{};
  P o{};             // o_proj [D × H·hd]
  P o_bias{};        // [D]
  P attn_norm{};     // Gemma's post_attention_layernorm: on attention's output [D]
  P ln2{};           // the MLP's input norm [D]: post_attention_layernorm (Llama), pre_feedforward_layernorm (Gemma)
  P gate_up{};       // gate_proj, up_proj stacked: [2I × D]
  P gate_up_bias{};  // [2I]
  P down{};          // down_proj [D × I]
  P down_bias{};     // [D]
  P mlp_norm{};      // Gemma's post_feedforward_layernorm [D]
};

// Where a layer's adapters add to: the q|k|v product, o, the gate|up product, down.
enum class LoraSite { qkv, o, gate_up, down };
inline constexpr int kLoraSites = 4;

// One adapter (model/lora.hpp): y[:, col .. col + out) += s·(x·Aᵀ)·Bᵀ, its x·Aᵀ kept in the
// activations' lora_u at column u.
template <typename T>
struct LoraPiece {
  T* A = nullptr;   // [rank × in]
  T* B = nullptr;   // [out × rank]
  T* dA = nullptr;
  T* dB = nullptr;
  std::int64_t in = 0, out = 0, col = 0, u = 0;
  // Dropout: the adapter's index in the whole model (its draws' stream) and where this
  // rank's input columns lie among the whole model's (under tp, a row-parallel slice's).
  std::uint64_t draw = 0;
  std::int64_t in_begin = 0;
};

template <typename T>
struct BasicModel<T>::Impl {
  ModelConfig cfg;
  ModelOptions opt;
  backend::Backend* be = nullptr;
  backend::Ops<T>* ops = nullptr;
  int begin = 0, end = 0;
  // This tp rank's share: query and key/value heads, intermediate units, vocabulary rows.
  int heads = 0, kv_heads = 0;
  std::int64_t inter = 0, vocab_begin = 0, vocab_end = 0;
  backend::Buffer<std::byte> params;           // the compute copy, opt.dtype elements
  backend::Buffer<T> grads;
  std::int64_t count = 0;                      // parameters
  std::vector<Tensor<T>> tensors;
  using W = backend::Weights;
  W embed;      T* embed_g = nullptr;
  std::vector<LayerWeights<W>> w;
  std::vector<LayerWeights<T*>> g;
  W norm;       T* norm_g = nullptr;
  W head;       T* head_g = nullptr;   // LM head (may alias the embedding)
  W score;      T* score_g = nullptr;
  W score_bias; T* score_bias_g = nullptr;
  // [max_position_embeddings × hd/2], times the rope's attention factor; the sliding
  // layers' own where the config has a local RoPE (gemma3), else empty.
  backend::Buffer<T> cos, sin, cos_local, sin_local;
  // LoRA (model/lora.cpp): the adapters' values and gradients, their tensors, each layer's
  // pieces by site, and the columns of x·Aᵀ a token holds per layer (rank × adapters).
  backend::Buffer<T> lora_params, lora_grads;
  std::vector<Tensor<T>> adapters;
  std::vector<std::array<std::vector<LoraPiece<T>>, kLoraSites>> lora;
  std::int64_t lora_cols = 0;
  bool adapters_on = true;
  std::vector<std::uint64_t> adapter_streams;   // each adapter's seed stream (init_adapters)
  // Under tp, the replicated adapters (A of q/k/v/gate/up, B of o/down): the backward writes
  // this rank's part of their gradients here, then sums them over the group into their grad.
  struct PartialGrad {
    T* part;
    T* grad;
    std::int64_t n;
  };
  backend::Buffer<T> lora_partial;
  std::vector<PartialGrad> lora_partial_of;
  // LoraOptions::value_head: the value head's trained copy (and its bias), in lora_params.
  W score_copy; T* score_copy_g = nullptr;
  W score_bias_copy; T* score_bias_copy_g = nullptr;
  bool frozen() const { return opt.lora.enabled(); }
  // The widest input of an adapter on this rank (its dropout scratch's row).
  std::int64_t lora_max_in() const {
    std::int64_t most = 0;
    for (const auto& sites : lora)
      for (const auto& pieces : sites)
        for (const LoraPiece<T>& p : pieces) most = std::max(most, p.in);
    return most;
  }
  bool adapting() const { return lora_cols > 0 && adapters_on; }
  // The value head the forward reads and the backward trains: the trained copy while the
  // adapters are on, else the base's.
  bool head_copy() const { return adapting() && score_copy; }
  W value_w() const { return head_copy() ? score_copy : score; }
  T* value_g() const { return head_copy() ? score_copy_g : score_g; }
  W value_bias_w() const { return head_copy() ? score_bias_copy : score_bias; }
  T* value_bias_g() const { return head_copy() ? score_bias_copy_g : score_bias_g; }

  bool first() const { return begin == 0; }
  bool last() const { return end == cfg.num_hidden_layers; }
  int layers() const { return end - begin; }
  const TensorParallel& tp() const { return opt.tp; }
  bool tp_split() const { return opt.tp.size > 1; }
  std::int64_t qkv_rows() const { return std::int64_t(heads + 2 * kv_heads) * cfg.head_dim(); }
  // An RMSNorm over rows of `dim` with the config's eps and gain offset.
  backend::NormShape norm_shape(std::int64_t rows, std::int64_t dim) const {
    return {.rows = rows, .dim = dim, .eps = cfg.rms_norm_eps, .weight_offset = cfg.norm_weight_offset};
  }
  // The q (k: the key) heads of a fused q|k|v buffer's rows as one RMSNorm each (qk_norm).
  backend::NormShape head_norm(std::int64_t rows, bool keys, std::int64_t stride) const {
    return {.rows = rows, .dim = cfg.head_dim(), .groups = keys ? kv_heads : heads, .stride = stride,
            .eps = cfg.rms_norm_eps, .weight_offset = cfg.norm_weight_offset};
  }
  // Layer l's attention (this rank's heads): its scale, soft-cap and window.
  backend::AttentionDims attention_dims(int l, std::int64_t q_stride, std::int64_t kv_stride) const {
    return {heads, kv_heads, cfg.head_dim(), q_stride, kv_stride, cfg.attention_scale(), cfg.attn_logit_softcapping,
            cfg.is_sliding(begin + l) ? cfg.sliding_window : 0};
  }
  // Layer l's rotary tables.
  std::pair<const T*, const T*> rope_tables(int l) const {
    if (cos_local.size() > 0 && cfg.is_sliding(begin + l)) return {cos_local.data(), sin_local.data()};
    return {cos.data(), sin.data()};
  }
  bool biased() const { return cfg.qkv_bias || cfg.o_bias || cfg.mlp_bias || score_bias; }
};

// Per-layer activation slots; in inference mode one slot serves every layer.
template <typename T>
struct BasicActivations<T>::Impl {
  backend::Backend* be = nullptr;
  bool training = false;
  std::int64_t max_tokens = 0, max_seqs = 0;
  int layers = 0, slots = 0;           // slots = layers (training) or 1; with recompute, the kept
                                       // layers and one shared slot for the recomputed ones
  std::vector<int> slot_of;            // training: each layer's slot
  std::vector<char> recompute;         // training: the layers backward recomputes
  int D = 0, QKV = 0, HD = 0, H = 0, I = 0, V = 0;
  bool has_logits = false;

  std::int64_t n = 0;                  // tokens of the last forward
  std::int64_t n_out = 0;              // rows of output(): n, or segments after forward_cached
  bool last_was_training_forward = false;
  std::vector<backend::AttentionSegment> segs;   // forward: every sequence; forward_cached: fresh prefills
  // forward_cached's inputs in one device buffer of 5 · max_tokens int32 (one upload per
  // step, fixed addresses for a captured graph): token ids, positions, cache slots written,
  // and per row the block-table row and the keys seen by paged attention (0: not paged).
  backend::Buffer<std::int32_t> step;
  std::vector<std::int32_t> host_step;
  std::vector<std::int32_t> host_tokens;
  std::vector<std::int64_t> last_row;            // each segment's last row         // tensor parallel: embed() reads them on the host
  std::int64_t n_seg = 0, paged_rows = 0;
  bool all_decode = false;                       // every segment one token: no gather of last rows
  const std::int32_t* pos_ptr = nullptr;         // the rows' positions (rope)
  std::int32_t* step_at(int part) { return step.data() + std::int64_t(part) * max_tokens; }
  // Vocabulary-parallel embedding: the runs [begin, end) of rows whose token this tp rank
  // holds (a.tokens then holds ids within the rank's slice).
  std::vector<std::pair<std::int64_t, std::int64_t>> owned_runs;
  backend::Buffer<std::int32_t> tokens, pos;

  // resid: training: layers + 1 rows of N × D (each layer's input, then the last one's
  // output), then one row per slot (each layer's mid-point, after attention); inference:
  // one N × D stream updated in place.
  backend::Buffer<T> resid;
  backend::Buffer<T> ln1, rstd1, qkv, att, lse, ln2, rstd2, gate_up, act;
  // Families beyond Llama (empty when the config has no such piece): q|k|v before the q/k
  // norms (training) and the norms' rstd [heads + kv heads per row]; Gemma's attention and
  // MLP outputs before their norms, with rstd, and a row of the normalised output.
  backend::Buffer<T> qkv_pre, qk_rstd, attn_out, rstd_ao, mlp_out, rstd_mo, normed;
  backend::Buffer<T> ones;                       // [N] of 1: biases are added as ones · biasᵀ
  backend::Buffer<T> final_out, final_rstd;      // last stage
  backend::Buffer<T> last_rows;                  // forward_cached: last token rows [segs × D]
  backend::Buffer<T> logits;                     // forward_cached: [segs × V]
  backend::Buffer<T> out_grad, d_res, d_ln, d_qkv, d_att, d_gate_up, d_act;  // training
  backend::Buffer<T> d_norm_out;                 // training, Gemma: the gradient of a norm's input [N × D]
  backend::Buffer<T> d_qk_norm;                  // training, qk_norm under tp: this pass's q/k norm gradients [2 hd]
  backend::Buffer<T> lora_u;                     // LoRA: x·Aᵀ of each adapter [slots × N × lora_cols]
  backend::Buffer<T> lora_du;                    // LoRA, training: an adapter's d(x·Aᵀ) [N × rank]
  // LoRA dropout (training, LoraOptions::dropout > 0): whether the last forward dropped, its
  // seed, each row's key, and one adapter's masked input (or masked d(input)) [N × its in].
  bool dropout_on = false;
  std::uint64_t dropout_seed = 0;
  backend::Buffer<std::uint64_t> row_keys;
  backend::Buffer<T> lora_xd;

  T* resid_at(int i) { return resid.data() + std::int64_t(i) * max_tokens * D; }
  T* in_at(int l) { return resid_at(l); }                                   // training: layer l's input (l = layers: the output)
  T* mid_at(int l) { return resid_at(layers + 1 + slot_of[std::size_t(l)]); }   // training
  std::int64_t slot(int l) const { return training ? slot_of[std::size_t(l)] : 0; }
  const T* output_ptr = nullptr;
};

// Layer l of a training forward over whole sequences (forward.cpp): from a.in_at(l) through
// a.mid_at(l) to a.in_at(l + 1), its activations in the layer's slot. backward calls it again
// for a layer whose activations were not kept (ActivationOptions::recompute).
template <typename T>
void layer_forward_packed(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l);

// LoRA (lora.cpp). build_lora lays out the adapters of a model under construction.
// lora_forward adds layer l's adapters at `site` to y (rows ldy apart) from their input x
// (rows ldx apart), keeping x·Aᵀ in the layer's slot; lora_backward accumulates their
// gradients from dy and adds their share of the input's gradient into dx (rows ldx apart).
template <typename T>
void build_lora(typename BasicModel<T>::Impl& m);
template <typename T>
void lora_forward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l, LoraSite site,
                  const T* x, std::int64_t ldx, T* y, std::int64_t ldy);
// Under tp: the replicated adapters' gradient parts of the last backward summed over the
// group and added to their gradients (at the end of each backward).
template <typename T>
void lora_reduce_partials(typename BasicModel<T>::Impl& m);
template <typename T>
void lora_backward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l, LoraSite site,
                   const T* x, std::int64_t ldx, const T* dy, std::int64_t ldy, T* dx);

// The paged KV cache: one pool of blocks per stage (every layer's keys, then every layer's
// values), a block table per slot, a free list. The host keeps the tables and uploads them
// to `tables` (device) when a step changed them.
template <typename T>
struct BasicKVCache<T>::Impl {
  backend::Backend* be = nullptr;
  int layers = 0, slots = 0, block_size = 16, max_blocks = 0;   // max_blocks: per slot
  std::int64_t max_len = 0, row = 0, blocks = 0;                 // row = kv heads · head_dim
  backend::DType dtype = backend::DType::f32;
  backend::Buffer<std::byte> k, v;     // [layers × blocks × block_size × row] of dtype
  backend::Buffer<std::int32_t> tables;   // [slots × max_blocks]
  std::vector<std::int32_t> host_tables;  // -1: no block
  std::vector<std::int32_t> free_list;    // a stack: the block freed last is reused first
  std::vector<int> held;                  // blocks held per slot
  std::vector<std::int64_t> length;
  bool tables_dirty = true;

  std::size_t elem() const { return backend::dtype_size(dtype); }
  backend::PagedKV layer(int l) const {
    const std::size_t off = std::size_t(l) * std::size_t(blocks) * std::size_t(block_size) * std::size_t(row) * elem();
    return {const_cast<std::byte*>(k.data()) + off, const_cast<std::byte*>(v.data()) + off, dtype, block_size, row};
  }
  // Blocks the slot needs beyond what it holds to hold `len` tokens.
  std::int64_t extra_blocks(int slot, std::int64_t len) const {
    return std::max<std::int64_t>(0, (len + block_size - 1) / block_size - held[std::size_t(slot)]);
  }
  // Gives back the slot's blocks beyond those that hold `len` tokens.
  void release_beyond(int slot, std::int64_t len) {
    const int keep = int((len + block_size - 1) / block_size);
    int& h = held[std::size_t(slot)];
    for (; h > keep; --h) {
      std::int32_t& b = host_tables[std::size_t(slot) * std::size_t(max_blocks) + std::size_t(h - 1)];
      free_list.push_back(b);
      b = -1;
      tables_dirty = true;
    }
  }
};

}  // namespace braid::model
