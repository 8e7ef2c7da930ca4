// The forward passes: over whole sequences (training, scoring) and over new tokens
// appended to a KV cache (prefill and decode). Both run the same layer body; they
// differ only in where attention finds its keys and values.
#include "model/model_impl.hpp"

#include "backend/dropout_draw.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace braid::model {
namespace {

template <typename T>
struct LayerIo {
  const T* x;  // residual stream in
  T* mid;      // after attention (may alias x in inference)
  T* out;      // after the MLP (may alias mid)
};

// y[n × dim] (rows ld apart) += the bias in every row: a product with the activations' column
// of ones, so that it runs on any backend and with the bias stored as any weight type.
template <typename T>
void add_bias(const typename BasicModel<T>::Impl& m, const typename BasicActivations<T>::Impl& a, backend::Weights bias,
              std::int64_t n, std::int64_t dim, T* y, std::int64_t ld) {
  m.ops->gemm(false, false, n, dim, 1, T(1), a.ones.data(), 1, bias, dim, T(1), y, ld);
}

// A row-parallel product into the residual stream: out = in + y·Wᵀ (+ bias), the sum over the
// tp ranks made by one all-reduce (tp rank 0 adds the residual and the bias, every rank its
// part). With a norm on the product's output (Gemma), that output is summed first, kept in
// `pre` with its rstd for the backward, normalised, and then added to the residual.
template <typename T>
void residual_product(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l,
                      LoraSite site, const T* y, std::int64_t k, backend::Weights w, backend::Weights bias, backend::Weights out_norm,
                      const T* in, T* out, T* pre, T* pre_rstd) {
  const std::int64_t N = a.n, D = a.D;
  const bool lead = m.tp().rank == 0;
  if (!out_norm) {
    if (lead && out != in) m.be->copy(out, in, std::size_t(N * D) * sizeof(T));
    m.ops->gemm(false, true, N, D, k, T(1), y, k, w, k, lead ? T(1) : T(0), out, D);
    lora_forward<T>(m, a, l, site, y, k, out, D);
    if (bias && lead) add_bias<T>(m, a, bias, N, D, out, D);
    tp_all_reduce(*m.be, m.tp(), out, N * D);
    return;
  }
  m.ops->gemm(false, true, N, D, k, T(1), y, k, w, k, T(0), pre, D);
  lora_forward<T>(m, a, l, site, y, k, pre, D);
  if (bias && lead) add_bias<T>(m, a, bias, N, D, pre, D);
  tp_all_reduce(*m.be, m.tp(), pre, N * D);
  m.ops->rmsnorm_forward(pre, out_norm, m.norm_shape(N, D), a.normed.data(), pre_rstd);
  if (out != in) m.be->copy(out, in, std::size_t(N * D) * sizeof(T));
  m.ops->axpy(N * D, T(1), a.normed.data(), out);
}

// One decoder layer. attend(dims, qkv, att, lse) runs attention on the layer's q|k|v rows.
template <typename T, typename Attend>
void layer_forward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l,
                   LayerIo<T> io, Attend&& attend) {
  backend::Ops<T>& ops = *m.ops;
  const LayerWeights<backend::Weights>& w = m.w[std::size_t(l)];
  const ModelConfig& c = m.cfg;
  const std::int64_t N = a.n, D = a.D, QKV = a.QKV, HD = a.HD, I = a.I, M = a.max_tokens;
  const std::int64_t s = a.slot(l);
  T* ln1 = a.ln1.data() + s * M * D;
  T* rstd1 = a.rstd1.data() + s * M;
  T* qkv = a.qkv.data() + s * M * QKV;
  T* att = a.att.data() + s * M * HD;
  T* lse = a.lse.data() + s * M * a.H;
  T* ln2 = a.ln2.data() + s * M * D;
  T* rstd2 = a.rstd2.data() + s * M;
  T* gu = a.gate_up.data() + s * M * 2 * I;
  T* act = a.act.data() + s * M * I;

  ops.rmsnorm_forward(io.x, w.ln1, m.norm_shape(N, D), ln1, rstd1);
  ops.gemm(false, true, N, QKV, D, T(1), ln1, D, w.qkv, D, T(0), qkv, QKV);
  lora_forward<T>(m, a, l, LoraSite::qkv, ln1, D, qkv, QKV);
  if (w.qkv_bias) add_bias<T>(m, a, w.qkv_bias, N, QKV, qkv, QKV);
  const int hd = c.head_dim();
  if (c.qk_norm) {
    // Each head of q and of k normalised (Qwen3, Gemma 3); training keeps what came in.
    const T* in = qkv;
    if (a.training) {
      T* pre = a.qkv_pre.data() + s * M * QKV;
      m.be->copy(pre, qkv, std::size_t(N * QKV) * sizeof(T));
      in = pre;
    }
    T* rstd = a.qk_rstd.data() + s * M * (m.heads + m.kv_heads);
    const std::int64_t k_off = std::int64_t(m.heads) * hd;
    ops.rmsnorm_forward(in, w.q_norm, m.head_norm(N, false, QKV), qkv, rstd);
    ops.rmsnorm_forward(in + k_off, w.k_norm, m.head_norm(N, true, QKV), qkv + k_off, rstd + N * m.heads);
  }
  // The query heads and then the key heads, adjacent in a qkv row: one call rotates both.
  const auto [rope_cos, rope_sin] = m.rope_tables(l);
  ops.rope(qkv, N, QKV, m.heads + m.kv_heads, hd, a.pos_ptr, rope_cos, rope_sin, false);
  attend(m.attention_dims(l, QKV, QKV), qkv, att, lse);
  residual_product<T>(m, a, l, LoraSite::o, att, HD, w.o, w.o_bias, w.attn_norm, io.x, io.mid,
                      c.sandwich_norms ? a.attn_out.data() + s * M * D : nullptr,
                      c.sandwich_norms ? a.rstd_ao.data() + s * M : nullptr);

  ops.rmsnorm_forward(io.mid, w.ln2, m.norm_shape(N, D), ln2, rstd2);
  ops.gemm(false, true, N, 2 * I, D, T(1), ln2, D, w.gate_up, D, T(0), gu, 2 * I);
  lora_forward<T>(m, a, l, LoraSite::gate_up, ln2, D, gu, 2 * I);
  if (w.gate_up_bias) add_bias<T>(m, a, w.gate_up_bias, N, 2 * I, gu, 2 * I);
  if (c.hidden_act == Activation::gelu_tanh) ops.geglu_forward(gu, N, I, act);
  else ops.swiglu_forward(gu, N, I, act);
  residual_product<T>(m, a, l, LoraSite::down, act, I, w.down, w.down_bias, w.mlp_norm, io.mid, io.out,
                      c.sandwich_norms ? a.mlp_out.data() + s * M * D : nullptr,
                      c.sandwich_norms ? a.rstd_mo.data() + s * M : nullptr);
}

template <typename T>
void check_tokens(const typename BasicModel<T>::Impl& m, std::span<const std::int32_t> tokens, std::int64_t n) {
  if (std::int64_t(tokens.size()) != n)
    throw std::invalid_argument(fmt::format("forward: {} tokens given for {} positions", tokens.size(), n));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= m.cfg.vocab_size)
      throw std::invalid_argument(
          fmt::format("forward: token {} at row {} is outside the vocabulary of {}", tokens[i], i, m.cfg.vocab_size));
}

// Gemma's embeddings are scaled by √hidden_size (as transformers, the factor rounded to the
// activations' type).
template <typename T>
void scale_embeddings(const typename BasicModel<T>::Impl& m, std::int64_t N, T* x) {
  if (m.cfg.scale_embeddings) m.ops->scale(N * m.cfg.hidden_size, T(std::sqrt(double(m.cfg.hidden_size))), x);
}

// x[N × D] = the embedding rows of the tokens. Vocabulary-parallel under tp: each rank
// writes the rows of the tokens in its slice, zeros for the others, and an all-reduce
// sums them; a.owned_runs remembers which rows were its own for the backward.
template <typename T>
void embed(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a,
           std::span<const std::int32_t> tokens, std::int64_t N, T* x) {
  check_tokens<T>(m, tokens, N);
  const std::int64_t D = a.D;
  a.owned_runs.clear();
  if (!m.tp_split()) {
    m.be->copy_to_device(a.tokens.data(), tokens.data(), std::size_t(N) * sizeof(std::int32_t));
    m.ops->embedding_forward(a.tokens.data(), N, m.embed, D, x);
    scale_embeddings<T>(m, N, x);
    return;
  }
  std::vector<std::int32_t> local(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int32_t t = tokens[std::size_t(i)];
    const bool own = t >= m.vocab_begin && t < m.vocab_end;
    local[std::size_t(i)] = own ? std::int32_t(t - m.vocab_begin) : 0;
    if (!own) continue;
    if (!a.owned_runs.empty() && a.owned_runs.back().second == i) ++a.owned_runs.back().second;
    else a.owned_runs.push_back({i, i + 1});
  }
  m.be->copy_to_device(a.tokens.data(), local.data(), local.size() * sizeof(std::int32_t));
  m.ops->embedding_forward(a.tokens.data(), N, m.embed, D, x);
  std::int64_t done = 0;  // zero the rows between owned runs
  for (const auto& [b, e] : a.owned_runs) {
    if (b > done) m.be->fill_zero(x + done * D, std::size_t((b - done) * D) * sizeof(T));
    done = e;
  }
  if (N > done) m.be->fill_zero(x + done * D, std::size_t((N - done) * D) * sizeof(T));
  tp_all_reduce(*m.be, m.tp(), x, N * D);
  scale_embeddings<T>(m, N, x);
}

}  // namespace

template <typename T>
void layer_forward_packed(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l) {
  const std::int64_t k_off = std::int64_t(m.heads) * m.cfg.head_dim();
  const std::int64_t v_off = k_off + std::int64_t(m.kv_heads) * m.cfg.head_dim();
  layer_forward<T>(m, a, l, LayerIo<T>{a.in_at(l), a.mid_at(l), a.in_at(l + 1)},
                   [&](const backend::AttentionDims& dims, T* qkv, T* att, T* lse) {
                     m.ops->attention_forward(dims, a.segs, qkv, qkv + k_off, qkv + v_off, att, lse);
                   });
}

template <typename T>
void BasicModel<T>::forward(const Batch& batch, BasicActivations<T>& acts) const {
  const Impl& m = *impl_;
  auto& a = *acts.impl_;
  const auto& off = batch.offsets;
  if (off.size() < 2 || off[0] != 0) throw std::invalid_argument("forward: offsets must start at 0 and hold n+1 entries");
  const std::int64_t n_seq = std::int64_t(off.size()) - 1, N = off.back();
  if (n_seq > a.max_seqs || N > a.max_tokens)
    throw std::invalid_argument(fmt::format("forward: batch of {} sequences / {} tokens exceeds the activations' {} / {}",
                                            n_seq, N, a.max_seqs, a.max_tokens));
  a.n = N;
  a.n_out = N;
  a.segs.clear();
  // bf16 weights: the products and attention may round their f32 operands to bf16 too.
  backend::PrecisionScope precision(*m.be, m.opt.dtype);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(N));
  for (std::int64_t s = 0; s < n_seq; ++s) {
    const std::int64_t len = off[std::size_t(s + 1)] - off[std::size_t(s)];
    if (len < 0 || len > m.cfg.max_position_embeddings)
      throw std::invalid_argument(fmt::format("forward: sequence {} has length {} (max_position_embeddings {})", s,
                                              len, m.cfg.max_position_embeddings));
    a.segs.push_back({off[std::size_t(s)], len, off[std::size_t(s)], 0});
    for (std::int64_t i = 0; i < len; ++i) pos[std::size_t(off[std::size_t(s)] + i)] = std::int32_t(i);
  }
  m.be->copy_to_device(a.pos.data(), pos.data(), pos.size() * sizeof(std::int32_t));
  a.pos_ptr = a.pos.data();
  // LoRA dropout: each row's key from its sequence's and its position (backend/dropout_draw.hpp).
  a.dropout_on = a.training && m.adapting() && m.opt.lora.dropout > 0 && batch.dropout != nullptr;
  if (a.dropout_on) {
    const DropoutDraw& d = *batch.dropout;
    if (std::int64_t(d.sequence_keys.size()) != n_seq)
      throw std::invalid_argument(fmt::format("forward: {} dropout keys for {} sequences", d.sequence_keys.size(), n_seq));
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(N));
    for (std::int64_t s = 0; s < n_seq; ++s)
      for (std::int64_t i = off[std::size_t(s)]; i < off[std::size_t(s + 1)]; ++i)
        keys[std::size_t(i)] = backend::dropout_row_key(d.sequence_keys[std::size_t(s)], i - off[std::size_t(s)]);
    m.be->copy_to_device(a.row_keys.data(), keys.data(), keys.size() * sizeof(std::uint64_t));
    a.dropout_seed = d.seed;
  }

  const std::int64_t D = a.D;
  T* x = a.resid_at(0);
  if (m.first()) embed<T>(m, a, batch.tokens, N, x);
  const std::int64_t k_off = std::int64_t(m.heads) * m.cfg.head_dim();
  const std::int64_t v_off = k_off + std::int64_t(m.kv_heads) * m.cfg.head_dim();
  for (int l = 0; l < m.layers(); ++l) {
    if (a.training) {
      layer_forward_packed<T>(m, a, l);
      x = a.in_at(l + 1);
      continue;
    }
    layer_forward<T>(m, a, l, LayerIo<T>{x, x, x}, [&](const backend::AttentionDims& dims, T* qkv, T* att, T* lse) {
      m.ops->attention_forward(dims, a.segs, qkv, qkv + k_off, qkv + v_off, att, lse);
    });
  }
  if (m.last()) {
    m.ops->rmsnorm_forward(x, m.norm, m.norm_shape(N, D), a.final_out.data(), a.final_rstd.data());
    a.output_ptr = a.final_out.data();
  } else {
    a.output_ptr = x;
  }
  if (a.training) m.be->fill_zero(a.out_grad.data(), std::size_t(N * D) * sizeof(T));
  a.last_was_training_forward = a.training;
}

template <typename T>
void BasicModel<T>::forward_cached(std::span<const std::int32_t> tokens, std::span<const Segment> segments,
                                   BasicKVCache<T>& cache, BasicActivations<T>& acts) const {
  prepare_cached(tokens, segments, cache, acts);
  run_cached(cache, acts);
}

template <typename T>
void BasicModel<T>::prepare_cached(std::span<const std::int32_t> tokens, std::span<const Segment> segments,
                                   BasicKVCache<T>& cache, BasicActivations<T>& acts, std::int64_t pad_to) const {
  const Impl& m = *impl_;
  auto& a = *acts.impl_;
  auto& kv = *cache.impl_;
  if (kv.layers != m.layers()) throw std::invalid_argument("forward_cached: the cache was made for another stage");
  if (kv.be != m.be) throw std::invalid_argument("forward_cached: the cache was made on another backend");
  const std::int64_t n_seg = std::int64_t(segments.size());
  if (n_seg == 0 && pad_to <= 0) throw std::invalid_argument("forward_cached: no segments");
  const std::int64_t rows_out = std::max(n_seg, pad_to);
  if (rows_out > a.max_seqs) throw std::invalid_argument("forward_cached: more segments than the activations hold");
  std::vector<char> seen(std::size_t(kv.slots), 0);
  std::int64_t N = 0, extra = 0;
  bool all_decode = true;
  for (const Segment& sg : segments) {
    if (sg.slot < 0 || sg.slot >= kv.slots) throw std::invalid_argument(fmt::format("forward_cached: no slot {}", sg.slot));
    if (seen[std::size_t(sg.slot)]++) throw std::invalid_argument(fmt::format("forward_cached: slot {} given twice", sg.slot));
    const std::int64_t past = kv.length[std::size_t(sg.slot)];
    if (sg.len <= 0 || past + sg.len > kv.max_len)
      throw std::invalid_argument(fmt::format("forward_cached: slot {} would hold {} tokens (cache max_len {})", sg.slot,
                                              past + sg.len, kv.max_len));
    extra += kv.extra_blocks(sg.slot, past + sg.len);
    all_decode = all_decode && sg.len == 1;
    N += sg.len;
  }
  if (pad_to > n_seg && !all_decode) throw std::invalid_argument("forward_cached: only decode steps are padded");
  const std::int64_t rows = all_decode ? rows_out : N;
  a.dropout_on = false;   // generation: no dropout
  if (rows > a.max_tokens) throw std::invalid_argument("forward_cached: more tokens than the activations hold");
  if (m.first()) check_tokens<T>(m, tokens, N);
  if (extra > std::int64_t(kv.free_list.size()))
    throw KVCacheFull(fmt::format("forward_cached: the step needs {} more KV-cache blocks, {} of {} are free", extra,
                                  kv.free_list.size(), kv.blocks));

  // Blocks first (nothing can fail after this point), then each row's inputs.
  a.host_step.assign(std::size_t(5 * a.max_tokens), 0);
  std::int32_t* tok = a.host_step.data();
  std::int32_t* pos = tok + a.max_tokens;
  std::int32_t* slot_of = pos + a.max_tokens;
  std::int32_t* row_seq = slot_of + a.max_tokens;
  std::int32_t* row_ctx = row_seq + a.max_tokens;
  a.segs.clear();
  a.last_row.clear();
  a.paged_rows = 0;
  std::int64_t r = 0;
  for (const Segment& sg : segments) {
    const std::int64_t past = kv.length[std::size_t(sg.slot)];
    int& held = kv.held[std::size_t(sg.slot)];
    for (std::int64_t need = kv.extra_blocks(sg.slot, past + sg.len); need > 0; --need) {
      kv.host_tables[std::size_t(sg.slot) * std::size_t(kv.max_blocks) + std::size_t(held)] = kv.free_list.back();
      kv.free_list.pop_back();
      ++held;
      kv.tables_dirty = true;
    }
    const std::int32_t* table = kv.host_tables.data() + std::size_t(sg.slot) * std::size_t(kv.max_blocks);
    // A fresh prompt attends over its own rows (attention_forward); other rows, and every
    // row of a decode step (a graph's step has no host-side segment list), read the cache.
    const bool fresh = past == 0 && !all_decode;
    if (fresh) a.segs.push_back({r, sg.len, r, 0});
    for (std::int64_t i = 0; i < sg.len; ++i, ++r) {
      const std::int64_t p = past + i;
      if (m.first()) tok[r] = tokens[std::size_t(r)];
      pos[r] = std::int32_t(p);
      slot_of[r] = table[p / kv.block_size] * kv.block_size + std::int32_t(p % kv.block_size);
      row_seq[r] = sg.slot;
      row_ctx[r] = fresh ? 0 : std::int32_t(p + 1);
      a.paged_rows += !fresh;
    }
    kv.length[std::size_t(sg.slot)] += sg.len;
    a.last_row.push_back(r - 1);
  }
  for (; r < rows; ++r) slot_of[r] = -1;  // padding: inert rows (row_ctx 0: no attention)
  a.n = rows;
  a.n_seg = n_seg;
  a.all_decode = all_decode;
  if (m.tp_split()) a.host_tokens.assign(tokens.begin(), tokens.end());
  // One upload of the step's inputs; the block tables only when a block changed hands.
  // (From host vectors that stay put until the next step.)
  const backend::Stream stream = m.be->current_stream();
  for (int part = 0; part < 5; ++part) {
    m.be->copy_to_device_async(a.step_at(part), a.host_step.data() + part * a.max_tokens,
                               std::size_t(rows) * sizeof(std::int32_t), stream);
  }
  if (kv.tables_dirty) {
    m.be->copy_to_device_async(kv.tables.data(), kv.host_tables.data(), kv.host_tables.size() * sizeof(std::int32_t),
                               stream);
    kv.tables_dirty = false;
  }
  a.pos_ptr = a.step_at(1);
}

template <typename T>
void BasicModel<T>::run_cached(BasicKVCache<T>& cache, BasicActivations<T>& acts) const {
  const Impl& m = *impl_;
  auto& a = *acts.impl_;
  auto& kv = *cache.impl_;
  const std::int64_t N = a.n, n_seg = a.n_seg, D = a.D, row = kv.row;
  T* x = a.resid_at(0);  // in place through every layer
  if (m.first()) {
    if (m.tp_split()) {
      embed<T>(m, a, a.host_tokens, N, x);
    } else {
      m.ops->embedding_forward(a.step_at(0), N, m.embed, D, x);
      scale_embeddings<T>(m, N, x);
    }
  }
  const std::int64_t k_off = std::int64_t(m.heads) * m.cfg.head_dim();
  const std::int64_t v_off = k_off + row;
  const backend::PagedRows paged{.block_tables = kv.tables.data(), .max_blocks = kv.max_blocks,
                                 .row_seq = a.step_at(3), .row_ctx = a.step_at(4), .max_context = kv.max_len};
  for (int l = 0; l < m.layers(); ++l) {
    const backend::PagedKV layer = kv.layer(l);
    layer_forward<T>(m, a, l, LayerIo<T>{x, x, x}, [&](const backend::AttentionDims& dims, T* qkv, T* att, T* lse) {
      m.ops->paged_kv_write(N, qkv + k_off, qkv + v_off, a.QKV, a.step_at(2), layer);
      if (!a.segs.empty()) m.ops->attention_forward(dims, a.segs, qkv, qkv + k_off, qkv + v_off, att, lse);
      if (a.paged_rows > 0 || a.all_decode) m.ops->paged_attention(dims, N, qkv, layer, paged, att);
    });
  }

  if (m.last()) {
    // The logits rows: every row of a decode step (padding included), else each segment's last.
    const T* last = x;
    std::int64_t rows = N;
    if (!a.all_decode) {
      rows = n_seg;
      for (std::int64_t s = 0; s < n_seg; ++s) {
        m.be->copy(a.last_rows.data() + s * D, x + a.last_row[std::size_t(s)] * D, std::size_t(D) * sizeof(T));
      }
      last = a.last_rows.data();
    }
    m.ops->rmsnorm_forward(last, m.norm, m.norm_shape(rows, D), a.final_out.data(), a.final_rstd.data());
    if (a.has_logits) lm_logits(a.final_out.data(), rows, a.logits.data());
    a.output_ptr = a.final_out.data();
    a.n_out = rows;
  } else {
    a.output_ptr = x;
    a.n_out = N;
  }
  a.last_was_training_forward = false;
}

template void layer_forward_packed<float>(const BasicModel<float>::Impl&, BasicActivations<float>::Impl&, int);
template void layer_forward_packed<double>(const BasicModel<double>::Impl&, BasicActivations<double>::Impl&, int);
template void BasicModel<float>::forward(const Batch&, BasicActivations<float>&) const;
template void BasicModel<double>::forward(const Batch&, BasicActivations<double>&) const;
template void BasicModel<float>::forward_cached(std::span<const std::int32_t>, std::span<const Segment>,
                                                BasicKVCache<float>&, BasicActivations<float>&) const;
template void BasicModel<double>::forward_cached(std::span<const std::int32_t>, std::span<const Segment>,
                                                 BasicKVCache<double>&, BasicActivations<double>&) const;
template void BasicModel<float>::prepare_cached(std::span<const std::int32_t>, std::span<const Segment>,
                                                BasicKVCache<float>&, BasicActivations<float>&, std::int64_t) const;
template void BasicModel<double>::prepare_cached(std::span<const std::int32_t>, std::span<const Segment>,
                                                 BasicKVCache<double>&, BasicActivations<double>&, std::int64_t) const;
template void BasicModel<float>::run_cached(BasicKVCache<float>&, BasicActivations<float>&) const;
template void BasicModel<double>::run_cached(BasicKVCache<double>&, BasicActivations<double>&) const;

}  // namespace braid::model
