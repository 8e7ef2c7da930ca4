// The backward pass, layer by layer in reverse, from acts.output_grad() to the
// parameter gradients (accumulated) and, on later stages, acts.input_grad().
// d_res carries the gradient of the residual stream; every other gradient buffer
// is reused by each layer in turn.
#include "model/model_impl.hpp"

#include <stdexcept>

namespace braid::model {

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
    ops.rmsnorm_backward(a.resid_at(2 * m.layers()), m.norm, a.final_rstd.data(), a.out_grad.data(), N, D, d_res,
                         m.norm_g);
  } else {
    m.be->copy(d_res, a.out_grad.data(), std::size_t(N * D) * sizeof(T));
  }

  const auto dims = backend::AttentionDims{m.heads, m.kv_heads, hd, QKV, QKV};
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
    const T* x = a.resid_at(2 * l);
    const T* mid = a.resid_at(2 * l + 1);
    const T* ln1 = a.ln1.data() + l * M * D;
    const T* rstd1 = a.rstd1.data() + l * M;
    const T* qkv = a.qkv.data() + l * M * QKV;
    const T* att = a.att.data() + l * M * HD;
    const T* lse = a.lse.data() + l * M * a.H;
    const T* ln2 = a.ln2.data() + l * M * D;
    const T* rstd2 = a.rstd2.data() + l * M;
    const T* gu = a.gate_up.data() + l * M * 2 * I;
    const T* act = a.act.data() + l * M * I;

    // MLP: out = mid + down(swiglu(gate_up(ln2(mid)))).
    ops.linear_backward(N, D, I, d_res, w.down, act, T(0), d_act, g.down);
    ops.swiglu_backward(gu, d_act, N, I, d_gu);
    ops.linear_backward(N, 2 * I, D, d_gu, w.gate_up, ln2, T(0), d_ln, g.gate_up);
    tp_all_reduce(*m.be, m.tp(), d_ln, N * D);   // column-parallel gate_up: sum the ranks' parts
    ops.rmsnorm_backward(mid, w.ln2, rstd2, d_ln, N, D, d_res, g.ln2);

    // Attention: mid = x + o(attention(rope(qkv(ln1(x))))).
    ops.linear_backward(N, D, HD, d_res, w.o, att, T(0), d_att, g.o);
    m.be->fill_zero(d_qkv, std::size_t(N * QKV) * sizeof(T));
    ops.attention_backward(dims, a.segs, qkv, qkv + k_off, qkv + v_off, att, lse, d_att, d_qkv, d_qkv + k_off,
                           d_qkv + v_off);
    ops.rope(d_qkv, N, QKV, m.heads + m.kv_heads, hd, a.pos.data(), m.cos.data(), m.sin.data(), true);  // q and k
    ops.linear_backward(N, QKV, D, d_qkv, w.qkv, ln1, T(0), d_ln, g.qkv);
    tp_all_reduce(*m.be, m.tp(), d_ln, N * D);   // column-parallel q|k|v
    ops.rmsnorm_backward(x, w.ln1, rstd1, d_ln, N, D, d_res, g.ln1);
  }

  if (m.first()) {
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
