// The forward passes: over whole sequences (training, scoring) and over new tokens
// appended to a KV cache (prefill and decode). Both run the same layer body; they
// differ only in where attention finds its keys and values.
#include "model/model_impl.hpp"

#include <fmt/format.h>

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

// One decoder layer. attend(qkv, att, lse) runs attention on the layer's q|k|v rows.
template <typename T, typename Attend>
void layer_forward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l,
                   LayerIo<T> io, Attend&& attend) {
  backend::Ops<T>& ops = *m.ops;
  const LayerWeights<backend::Weights>& w = m.w[std::size_t(l)];
  const ModelConfig& c = m.cfg;
  const std::int64_t N = a.n, D = a.D, QKV = a.QKV, HD = a.HD, I = a.I;
  const std::int64_t s = a.slot(l);
  T* ln1 = a.ln1.data() + s * a.max_tokens * D;
  T* rstd1 = a.rstd1.data() + s * a.max_tokens;
  T* qkv = a.qkv.data() + s * a.max_tokens * QKV;
  T* att = a.att.data() + s * a.max_tokens * HD;
  T* lse = a.lse.data() + s * a.max_tokens * a.H;
  T* ln2 = a.ln2.data() + s * a.max_tokens * D;
  T* rstd2 = a.rstd2.data() + s * a.max_tokens;
  T* gu = a.gate_up.data() + s * a.max_tokens * 2 * I;
  T* act = a.act.data() + s * a.max_tokens * I;

  ops.rmsnorm_forward(io.x, w.ln1, N, D, c.rms_norm_eps, ln1, rstd1);
  ops.gemm(false, true, N, QKV, D, T(1), ln1, D, w.qkv, D, T(0), qkv, QKV);
  const int hd = c.head_dim();
  // The query heads and then the key heads, adjacent in a qkv row: one call rotates both.
  ops.rope(qkv, N, QKV, m.heads + m.kv_heads, hd, a.pos_ptr, m.cos.data(), m.sin.data(), false);
  attend(qkv, att, lse);
  // Row-parallel out-projection: every tp rank adds its heads' part, tp rank 0 also the
  // residual, and one all-reduce makes the sum (a no-op at tp 1).
  const bool lead = m.tp().rank == 0;
  if (lead && io.mid != io.x) m.be->copy(io.mid, io.x, std::size_t(N * D) * sizeof(T));
  ops.gemm(false, true, N, D, HD, T(1), att, HD, w.o, HD, lead ? T(1) : T(0), io.mid, D);
  tp_all_reduce(*m.be, m.tp(), io.mid, N * D);

  ops.rmsnorm_forward(io.mid, w.ln2, N, D, c.rms_norm_eps, ln2, rstd2);
  ops.gemm(false, true, N, 2 * I, D, T(1), ln2, D, w.gate_up, D, T(0), gu, 2 * I);
  ops.swiglu_forward(gu, N, I, act);
  if (lead && io.out != io.mid) m.be->copy(io.out, io.mid, std::size_t(N * D) * sizeof(T));
  ops.gemm(false, true, N, D, I, T(1), act, I, w.down, I, lead ? T(1) : T(0), io.out, D);
  tp_all_reduce(*m.be, m.tp(), io.out, N * D);
}

template <typename T>
backend::AttentionDims dims_of(const typename BasicModel<T>::Impl& m, std::int64_t q_stride, std::int64_t kv_stride) {
  return {m.heads, m.kv_heads, m.cfg.head_dim(), q_stride, kv_stride};
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
}

}  // namespace

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

  const std::int64_t D = a.D;
  T* x = a.resid_at(0);
  if (m.first()) embed<T>(m, a, batch.tokens, N, x);
  const auto dims = dims_of<T>(m, a.QKV, a.QKV);
  const std::int64_t k_off = std::int64_t(m.heads) * m.cfg.head_dim();
  const std::int64_t v_off = k_off + std::int64_t(m.kv_heads) * m.cfg.head_dim();
  for (int l = 0; l < m.layers(); ++l) {
    LayerIo<T> io{x, x, x};
    if (a.training) io = {a.resid_at(2 * l), a.resid_at(2 * l + 1), a.resid_at(2 * l + 2)};
    layer_forward<T>(m, a, l, io, [&](T* qkv, T* att, T* lse) {
      m.ops->attention_forward(dims, a.segs, qkv, qkv + k_off, qkv + v_off, att, lse);
    });
    x = io.out;
  }
  if (m.last()) {
    m.ops->rmsnorm_forward(x, m.norm, N, D, m.cfg.rms_norm_eps, a.final_out.data(), a.final_rstd.data());
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
    if (m.tp_split()) embed<T>(m, a, a.host_tokens, N, x);
    else m.ops->embedding_forward(a.step_at(0), N, m.embed, D, x);
  }
  const auto dims = dims_of<T>(m, a.QKV, a.QKV);
  const std::int64_t k_off = std::int64_t(m.heads) * m.cfg.head_dim();
  const std::int64_t v_off = k_off + row;
  const backend::PagedRows paged{.block_tables = kv.tables.data(), .max_blocks = kv.max_blocks,
                                 .row_seq = a.step_at(3), .row_ctx = a.step_at(4), .max_context = kv.max_len};
  for (int l = 0; l < m.layers(); ++l) {
    const backend::PagedKV layer = kv.layer(l);
    layer_forward<T>(m, a, l, LayerIo<T>{x, x, x}, [&](T* qkv, T* att, T* lse) {
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
    m.ops->rmsnorm_forward(last, m.norm, rows, D, m.cfg.rms_norm_eps, a.final_out.data(), a.final_rstd.data());
    if (a.has_logits) lm_logits(a.final_out.data(), rows, a.logits.data());
    a.output_ptr = a.final_out.data();
    a.n_out = rows;
  } else {
    a.output_ptr = x;
    a.n_out = N;
  }
  a.last_was_training_forward = false;
}

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
