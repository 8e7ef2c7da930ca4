// Internal: the state behind BasicModel, BasicActivations and BasicKVCache, shared by
// the files that implement construction, forward, cached forward and backward.
#pragma once

#include "model/model.hpp"

#include <vector>

namespace braid::model {

// One decoder layer's weights (P = backend::Weights: the typed compute copy) or gradients
// (P = T*) inside the contiguous buffers. q|k|v and gate|up are adjacent tensors, so each
// pair is one fused matrix.
template <typename P>
struct LayerWeights {
  P ln1{};      // input_layernorm [D]
  P qkv{};      // q_proj, k_proj, v_proj stacked: [(H + 2KV)·hd × D]
  P o{};        // o_proj [D × H·hd]
  P ln2{};      // post_attention_layernorm [D]
  P gate_up{};  // gate_proj, up_proj stacked: [2I × D]
  P down{};     // down_proj [D × I]
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
  backend::Buffer<T> cos, sin;                  // [max_position_embeddings × hd/2]

  bool first() const { return begin == 0; }
  bool last() const { return end == cfg.num_hidden_layers; }
  int layers() const { return end - begin; }
  const TensorParallel& tp() const { return opt.tp; }
  bool tp_split() const { return opt.tp.size > 1; }
  std::int64_t qkv_rows() const { return std::int64_t(heads + 2 * kv_heads) * cfg.head_dim(); }
};

// Per-layer activation slots; in inference mode one slot serves every layer.
template <typename T>
struct BasicActivations<T>::Impl {
  backend::Backend* be = nullptr;
  bool training = false;
  std::int64_t max_tokens = 0, max_seqs = 0;
  int layers = 0, slots = 0;           // slots = layers (training) or 1
  int D = 0, QKV = 0, HD = 0, H = 0, I = 0, V = 0;
  bool has_logits = false;

  std::int64_t n = 0;                  // tokens of the last forward
  std::int64_t n_out = 0;              // rows of output(): n, or segments after forward_cached
  bool last_was_training_forward = false;
  std::vector<backend::AttentionSegment> segs;
  // Vocabulary-parallel embedding: the runs [begin, end) of rows whose token this tp rank
  // holds (a.tokens then holds ids within the rank's slice).
  std::vector<std::pair<std::int64_t, std::int64_t>> owned_runs;
  backend::Buffer<std::int32_t> tokens, pos;

  // resid: training: 2·layers + 1 rows of N × D (input, then mid and out of each layer);
  // inference: one N × D stream updated in place.
  backend::Buffer<T> resid;
  backend::Buffer<T> ln1, rstd1, qkv, att, lse, ln2, rstd2, gate_up, act;
  backend::Buffer<T> final_out, final_rstd;      // last stage
  backend::Buffer<T> last_rows;                  // forward_cached: last token rows [segs × D]
  backend::Buffer<T> logits;                     // forward_cached: [segs × V]
  backend::Buffer<T> out_grad, d_res, d_ln, d_qkv, d_att, d_gate_up, d_act;  // training

  T* resid_at(int i) { return resid.data() + std::int64_t(i) * max_tokens * D; }
  std::int64_t slot(int l) const { return training ? l : 0; }
  const T* output_ptr = nullptr;
};

template <typename T>
struct BasicKVCache<T>::Impl {
  int layers = 0, slots = 0;
  std::int64_t max_len = 0, row = 0;   // row = kv heads · head_dim
  backend::Buffer<T> k, v;             // [layers × slots × max_len × row]
  std::vector<std::int64_t> length;

  std::int64_t layer_offset(int l) const { return std::int64_t(l) * slots * max_len * row; }
};

}  // namespace braid::model
