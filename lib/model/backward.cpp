// The backward pass, layer by layer in reverse, from acts.output_grad() to the
// parameter gradients (accumulated) and, on later stages, acts.input_grad().
// d_res carries the gradient of the residual stream; every other gradient buffer
// is reused by each layer in turn.
#include "model/model_impl.hpp"

#include <cmath>
#include <stdexcept>

namespace braid::model {

namespace {

// Σ over rows of d_y [n × dim] (rows ld apart) into a bias's gradient: onesᵀ · d_y.
template <typename T>
void bias_backward(const typename BasicModel<T>::Impl& m, const typename BasicActivations<T>::Impl& a, const T* d_y,
                   std::int64_t n, std::int64_t dim, std::int64_t ld, T* d_bias) {
  m.ops->gemm(true, false, 1, dim, n, T(1), a.ones.data(), 1, d_y, ld, T(1), d_bias, dim);
}

// The gradient of a row-parallel product's output (residual_product in forward.cpp): d_res
// itself, or through the norm on the output (Gemma) into d_norm_out.
template <typename T>
const T* through_out_norm(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a,
                          backend::Weights norm, T* d_norm, const T* pre, const T* rstd, const T* d_res) {
  if (!norm) return d_res;
  const std::int64_t N = a.n, D = a.D;
  backend::NormShape shape = m.norm_shape(N, D);
  shape.accumulate = false;
  m.ops->rmsnorm_backward(pre, norm, rstd, d_res, shape, a.d_norm_out.data(), d_norm);
  return a.d_norm_out.data();
}

// A linear layer's backward (ops.linear_backward): d_x = d_y·W, and d_w += d_yᵀ·x unless the
// base is frozen (LoRA), then the layer's adapters at `site`.
template <typename T>
void linear_back(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l, LoraSite site,
                 std::int64_t out, std::int64_t in, const T* d_y, backend::Weights w, const T* x, T* d_x, T* d_w) {
  const std::int64_t N = a.n;
  if (m.frozen()) m.ops->gemm(false, false, N, in, out, T(1), d_y, out, w, in, T(0), d_x, in);
  else m.ops->linear_backward(N, out, in, d_y, w, x, T(0), d_x, d_w);
  lora_backward<T>(m, a, l, site, x, in, d_y, out, d_x);
}

}  // namespace

template <typename T>
void BasicModel<T>::backward(BasicActivations<T>& acts) {
  Impl& m = *impl_;
  auto& a = *acts.impl_;
  if (!a.training) throw std::logic_error("backward: activations were made for inference");
  if (!a.last_was_training_forward) throw std::logic_error("backward: no forward() on these activations to go back through");
  backend::Ops<T>& ops = *m.ops;
  backend::PrecisionScope precision(*m.be, m.opt.dtype);   // as the forward
  const ModelConfig& c = m.cfg;
  const std::int64_t N = a.n, D = a.D, QKV = a.QKV, HD = a.HD, I = a.I, M = a.max_tokens;
  const int hd = c.head_dim();
  T* d_res = a.d_res.data();

  if (m.last()) {
    m.be->fill_zero(d_res, std::size_t(N * D) * sizeof(T));
    ops.rmsnorm_backward(a.in_at(m.layers()), m.norm, a.final_rstd.data(), a.out_grad.data(), m.norm_shape(N, D),
                         d_res, m.norm_g);
  } else {
    m.be->copy(d_res, a.out_grad.data(), std::size_t(N * D) * sizeof(T));
  }

  const std::int64_t k_off = std::int64_t(m.heads) * hd;
  const std::int64_t v_off = k_off + std::int64_t(m.kv_heads) * hd;
  T* d_ln = a.d_ln.data();
  T* d_qkv = a.d_qkv.data();
  T* d_att = a.d_att.data();
  T* d_gu = a.d_gate_up.data();
  T* d_act = a.d_act.data();

  for (int l = m.layers() - 1; l >= 0; --l) {
    const LayerWeights<backend::Weights>& w = m.w[std::size_t(l)];
    const LayerWeights<T*>& g = m.g[std::size_t(l)];
    // A layer whose activations were not kept runs its forward again into the shared slot
    // (rewriting its output a.in_at(l + 1), which the layers above no longer read).
    if (a.recompute[std::size_t(l)]) layer_forward_packed<T>(m, a, l);
    const std::int64_t s = a.slot(l);
    const T* x = a.in_at(l);
    const T* mid = a.mid_at(l);
    const T* ln1 = a.ln1.data() + s * M * D;
    const T* rstd1 = a.rstd1.data() + s * M;
    const T* qkv = a.qkv.data() + s * M * QKV;
    const T* att = a.att.data() + s * M * HD;
    const T* lse = a.lse.data() + s * M * a.H;
    const T* ln2 = a.ln2.data() + s * M * D;
    const T* rstd2 = a.rstd2.data() + s * M;
    const T* gu = a.gate_up.data() + s * M * 2 * I;
    const T* act = a.act.data() + s * M * I;

    // MLP: out = mid + down(glu(gate_up(ln2(mid)))) (Gemma: the MLP's output normalised).
    const T* d_mo = through_out_norm<T>(m, a, w.mlp_norm, g.mlp_norm, c.sandwich_norms ? a.mlp_out.data() + s * M * D : nullptr,
                                        c.sandwich_norms ? a.rstd_mo.data() + s * M : nullptr, d_res);
    linear_back<T>(m, a, l, LoraSite::down, D, I, d_mo, w.down, act, d_act, g.down);
    if (g.down_bias && !m.frozen()) bias_backward<T>(m, a, d_mo, N, D, D, g.down_bias);
    if (c.hidden_act == Activation::gelu_tanh) ops.geglu_backward(gu, d_act, N, I, d_gu);
    else ops.swiglu_backward(gu, d_act, N, I, d_gu);
    linear_back<T>(m, a, l, LoraSite::gate_up, 2 * I, D, d_gu, w.gate_up, ln2, d_ln, g.gate_up);
    if (g.gate_up_bias && !m.frozen()) bias_backward<T>(m, a, d_gu, N, 2 * I, 2 * I, g.gate_up_bias);
    tp_all_reduce(*m.be, m.tp(), d_ln, N * D);   // column-parallel gate_up: sum the ranks' parts
    ops.rmsnorm_backward(mid, w.ln2, rstd2, d_ln, m.norm_shape(N, D), d_res, g.ln2);

    // Attention: mid = x + o(attention(rope(qk_norm(qkv(ln1(x)))))) (Gemma: o's output normalised).
    const T* d_ao = through_out_norm<T>(m, a, w.attn_norm, g.attn_norm, c.sandwich_norms ? a.attn_out.data() + s * M * D : nullptr,
                                        c.sandwich_norms ? a.rstd_ao.data() + s * M : nullptr, d_res);
    linear_back<T>(m, a, l, LoraSite::o, D, HD, d_ao, w.o, att, d_att, g.o);
    if (g.o_bias && !m.frozen()) bias_backward<T>(m, a, d_ao, N, D, D, g.o_bias);
    m.be->fill_zero(d_qkv, std::size_t(N * QKV) * sizeof(T));
    ops.attention_backward(m.attention_dims(l, QKV, QKV), a.segs, qkv, qkv + k_off, qkv + v_off, att, lse, d_att, d_qkv,
                           d_qkv + k_off, d_qkv + v_off);
    const auto [rope_cos, rope_sin] = m.rope_tables(l);
    ops.rope(d_qkv, N, QKV, m.heads + m.kv_heads, hd, a.pos.data(), rope_cos, rope_sin, true);  // q and k
    if (c.qk_norm) {
      // The q and k heads' gradients through their norms, in place. Under tp each rank's heads
      // give part of the shared gains' gradients: this pass's parts are summed over the group.
      const T* pre = a.qkv_pre.data() + s * M * QKV;
      const T* rstd = a.qk_rstd.data() + s * M * (m.heads + m.kv_heads);
      T* dq = g.q_norm;
      T* dk = g.k_norm;
      if (m.tp_split()) {
        m.be->fill_zero(a.d_qk_norm.data(), a.d_qk_norm.size() * sizeof(T));
        dq = a.d_qk_norm.data();
        dk = dq + hd;
      }
      backend::NormShape qs = m.head_norm(N, false, QKV), ks = m.head_norm(N, true, QKV);
      qs.accumulate = ks.accumulate = false;
      ops.rmsnorm_backward(pre, w.q_norm, rstd, d_qkv, qs, d_qkv, dq);
      ops.rmsnorm_backward(pre + k_off, w.k_norm, rstd + N * m.heads, d_qkv + k_off, ks, d_qkv + k_off, dk);
      if (m.tp_split()) {
        tp_all_reduce(*m.be, m.tp(), a.d_qk_norm.data(), 2 * std::int64_t(hd));
        ops.axpy(hd, T(1), dq, g.q_norm);
        ops.axpy(hd, T(1), dk, g.k_norm);
      }
    }
    if (g.qkv_bias && !m.frozen()) bias_backward<T>(m, a, d_qkv, N, QKV, QKV, g.qkv_bias);
    linear_back<T>(m, a, l, LoraSite::qkv, QKV, D, d_qkv, w.qkv, ln1, d_ln, g.qkv);
    tp_all_reduce(*m.be, m.tp(), d_ln, N * D);   // column-parallel q|k|v
    ops.rmsnorm_backward(x, w.ln1, rstd1, d_ln, m.norm_shape(N, D), d_res, g.ln1);
  }

  lora_reduce_partials<T>(m);

  if (m.first() && !m.frozen()) {
    // Gemma: the embeddings were scaled by √hidden_size.
    if (c.scale_embeddings) ops.scale(N * D, T(std::sqrt(double(D))), d_res);
    if (!m.tp_split()) {
      ops.embedding_backward(a.tokens.data(), N, d_res, D, m.embed_g);
    } else {  // vocabulary-parallel: only the rows whose token is in this rank's slice
      for (const auto& [b, e] : a.owned_runs)
        ops.embedding_backward(a.tokens.data() + b, e - b, d_res + b * D, D, m.embed_g);
    }
  }
}

template void BasicModel<float>::backward(BasicActivations<float>&);
template void BasicModel<double>::backward(BasicActivations<double>&);

}  // namespace braid::model
