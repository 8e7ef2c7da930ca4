#include "plan/analytic_profile.hpp"

#include <algorithm>
#include <cmath>

namespace braid::plan {
namespace {

// Reads and writes of activations per token and hidden unit in one layer's
// forward pass (norms, residuals, rotary, SiLU, the inputs and outputs of
// each product): the memory traffic that is not weights.
constexpr double kActTrafficPerHidden = 24.0;
// Activations saved for backward per token: 34·h bytes at bf16 with
// flash attention (Korthikanti et al. 2022, without the a·s/h term).
constexpr double kSavedActPerHidden = 17.0;  // elements


}  // namespace

Roofline layer_forward_cost(const ModelShape& s, int dtype_bytes, double tokens, double seq_len) {
  const double h = static_cast<double>(s.hidden);
  Roofline r;
  // Causal attention: each token attends to seq_len/2 keys on average (a sliding layer at
  // most its window's), QK^T and AV over the heads' width.
  r.flops = 2.0 * tokens * s.layer_matmul_params() + 4.0 * tokens * s.attended_keys(seq_len) * s.attention_dim();
  r.bytes = dtype_bytes * (s.layer_params() + kActTrafficPerHidden * tokens * h);
  return r;
}

Roofline layer_decode_cost(const ModelShape& s, int dtype_bytes, double batch, double kv_len) {
  const double h = static_cast<double>(s.hidden);
  // A sliding layer reads only its window's keys (the cache keeps them all: kv_per_token).
  const double keys = s.decode_keys(kv_len);
  Roofline r;
  r.flops = 2.0 * batch * s.layer_matmul_params() + 4.0 * batch * keys * s.attention_dim();
  r.bytes = dtype_bytes * (s.layer_params() + kActTrafficPerHidden * batch * h) +
            batch * keys * 2.0 * s.kv_dim() * dtype_bytes;
  return r;
}

double roofline_seconds(const Roofline& r, const Hardware& hw) {
  return std::max(r.flops / (hw.peak_flops * hw.eff.matmul), r.bytes / (hw.mem_bandwidth * hw.eff.memory));
}

LayerMemory analytic_memory(const ModelShape& s, int dtype_bytes) {
  LayerMemory m;
  const double p = s.layer_params();
  m.weights = dtype_bytes * p;
  m.gradients = 4.0 * p;
  // Adam's two moments in fp32, plus fp32 master weights when training in 16 bits.
  m.optimizer = (dtype_bytes < 4 ? 12.0 : 8.0) * p;
  m.act_per_token = kSavedActPerHidden * dtype_bytes * static_cast<double>(s.hidden);
  m.kv_per_token = 2.0 * s.kv_dim() * dtype_bytes;
  m.embedding_weights = dtype_bytes * s.embedding_params();
  m.head_weights = dtype_bytes * s.head_params();
  return m;
}

ModelProfile analytic_model_profile(const ModelShape& s, const Hardware& hw, const ProfileGrids& g) {
  ModelProfile m;
  m.name = s.name.empty() ? s.key() : s.name;
  m.shape = s;
  const int dt = hw.dtype_bytes;
  const double h = static_cast<double>(s.hidden);
  const double out = s.value_head ? 1.0 : static_cast<double>(s.vocab);
  auto init2 = [](Table2& t, const std::vector<double>& x, const std::vector<double>& y) {
    t.x = x;
    t.y = y;
    t.v.assign(x.size() * y.size(), 0.0);
  };
  init2(m.layer_fwd, g.tokens, g.seq_len);
  init2(m.layer_bwd, g.tokens, g.seq_len);
  init2(m.layer_decode, g.batch, g.kv_len);
  for (std::size_t i = 0; i < g.tokens.size(); ++i) {
    for (std::size_t j = 0; j < g.seq_len.size(); ++j) {
      const Roofline f = layer_forward_cost(s, dt, g.tokens[i], g.seq_len[j]);
      m.layer_fwd.cell(i, j) = roofline_seconds(f, hw) + hw.layer_overhead;
      // Backward: twice the products (input and weight gradients), twice the traffic.
      const Roofline b{2.0 * f.flops, 2.0 * f.bytes};
      m.layer_bwd.cell(i, j) = roofline_seconds(b, hw) + 2.0 * hw.layer_overhead;
    }
  }
  for (std::size_t i = 0; i < g.batch.size(); ++i) {
    for (std::size_t j = 0; j < g.kv_len.size(); ++j) {
      m.layer_decode.cell(i, j) = roofline_seconds(layer_decode_cost(s, dt, g.batch[i], g.kv_len[j]), hw) +
                                  hw.layer_overhead;
    }
  }
  m.embed_fwd.x = m.embed_bwd.x = m.head_fwd.x = m.head_bwd.x = g.tokens;
  for (double n : g.tokens) {
    // Embedding: a gather forward, a scatter-add backward; pure traffic.
    m.embed_fwd.v.push_back(2.0 * dt * n * h / (hw.mem_bandwidth * hw.eff.memory) + hw.layer_overhead);
    m.embed_bwd.v.push_back(4.0 * dt * n * h / (hw.mem_bandwidth * hw.eff.memory) + hw.layer_overhead);
    // Head: the product with the output matrix, then log-softmax over the outputs in fp32.
    const Roofline hf{2.0 * n * h * out, dt * (h * out + n * h) + 8.0 * n * out};
    m.head_fwd.v.push_back(roofline_seconds(hf, hw) + hw.layer_overhead);
    m.head_bwd.v.push_back(roofline_seconds({2.0 * hf.flops, 2.0 * hf.bytes}, hw) + 2.0 * hw.layer_overhead);
  }
  if (!s.value_head) {
    // Sampling reads each row's fp32 logits a few times (max, normaliser, draw).
    m.sample.x = g.batch;
    for (double rows : g.batch) {
      m.sample.v.push_back(3.0 * 4.0 * rows * out / (hw.mem_bandwidth * hw.eff.memory) + hw.layer_overhead);
    }
  }
  // The roofline does not tell the packed pass from the KV-cache path.
  m.layer_prefill = m.layer_fwd;
  m.bs_max = find_bs_max(m.layer_decode);
  m.memory = analytic_memory(s, dt);
  return m;
}

CommProfile analytic_comm(const Hardware& hw) {
  CommProfile c;
  c.p2p_intra = {hw.intra_bandwidth * hw.eff.comm, hw.intra_latency};
  c.p2p_inter = {hw.inter_bandwidth * hw.eff.comm, hw.inter_latency};
  c.allreduce_intra = {hw.intra_bandwidth * hw.eff.comm, hw.intra_latency};
  c.allreduce_inter = {hw.inter_bandwidth * hw.eff.comm, hw.inter_latency};
  return c;
}

Profile analytic_profile(const Hardware& hw, const std::vector<ModelShape>& shapes, const ProfileGrids& g) {
  Profile p;
  p.source = "analytic";
  p.hardware = hw;
  p.comm = analytic_comm(hw);
  for (const auto& s : shapes) {
    if (p.find(s) == nullptr) p.models.push_back(analytic_model_profile(s, hw, g));
  }
  return p;
}

Efficiency calibrate_efficiency(const Hardware& hw, const Profile& measured) {
  Efficiency e = hw.eff;
  std::vector<double> mm, mem;
  Hardware ideal = hw;
  ideal.eff = {1.0, 1.0, 1.0};
  for (const auto& m : measured.models) {
    const int dt = measured.hardware.dtype_bytes;
    for (std::size_t i = 0; i < m.layer_fwd.x.size(); ++i) {
      for (std::size_t j = 0; j < m.layer_fwd.y.size(); ++j) {
        const Roofline r = layer_forward_cost(m.shape, dt, m.layer_fwd.x[i], m.layer_fwd.y[j]);
        const double t_compute = r.flops / ideal.peak_flops, t_memory = r.bytes / ideal.mem_bandwidth;
        const double t = m.layer_fwd.cell(i, j) - hw.layer_overhead;
        // Only points well inside one regime say something about that regime.
        if (t > 0 && t_compute > 4 * t_memory) mm.push_back(t_compute / t);
      }
    }
    for (std::size_t i = 0; i < m.layer_decode.x.size(); ++i) {
      for (std::size_t j = 0; j < m.layer_decode.y.size(); ++j) {
        const Roofline r = layer_decode_cost(m.shape, dt, m.layer_decode.x[i], m.layer_decode.y[j]);
        const double t_compute = r.flops / ideal.peak_flops, t_memory = r.bytes / ideal.mem_bandwidth;
        const double t = m.layer_decode.cell(i, j) - hw.layer_overhead;
        if (t > 0 && t_memory > 4 * t_compute) mem.push_back(t_memory / t);
      }
    }
  }
  if (!mm.empty()) e.matmul = std::clamp(median(mm), 1e-3, 1.0);
  if (!mem.empty()) e.memory = std::clamp(median(mem), 1e-3, 1.0);
  return e;
}

}  // namespace braid::plan
