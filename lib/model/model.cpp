// Construction of a model (or a stage of one): the parameter layout under Hugging Face
// names, initialisation, the heads, and the buffers a forward needs.
#include "model/model_impl.hpp"

#include "comm/communicator.hpp"
#include "core/rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>

namespace braid::model {
namespace {

using Layout = TensorInfo;

// The stage's tensors in storage order. Within a layer q, k, v and gate, up are adjacent, and
// so are their biases. The pieces of other families come where they act; a Llama stage's
// order is Llama's (input norm, q, k, v, o, norm, gate, up, down).
std::vector<Layout> layout(const ModelConfig& c, const ModelOptions& o, int begin, int end) {
  const std::int64_t D = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const std::int64_t hd = c.head_dim(), H = c.num_attention_heads, KV = c.num_key_value_heads;
  const bool first = begin == 0, last = end == c.num_hidden_layers;
  std::vector<Layout> out;
  // A last stage of a tied model keeps its own copy of the embedding as its LM head.
  if (first || (last && o.lm_head && c.tie_word_embeddings)) out.push_back({"model.embed_tokens.weight", {V, D}, -1});
  for (int l = begin; l < end; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    out.push_back({p + "input_layernorm.weight", {D}, l});
    out.push_back({p + "self_attn.q_proj.weight", {H * hd, D}, l});
    out.push_back({p + "self_attn.k_proj.weight", {KV * hd, D}, l});
    out.push_back({p + "self_attn.v_proj.weight", {KV * hd, D}, l});
    if (c.qkv_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {H * hd}, l});
      out.push_back({p + "self_attn.k_proj.bias", {KV * hd}, l});
      out.push_back({p + "self_attn.v_proj.bias", {KV * hd}, l});
    }
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {hd}, l});
      out.push_back({p + "self_attn.k_norm.weight", {hd}, l});
    }
    out.push_back({p + "self_attn.o_proj.weight", {D, H * hd}, l});
    if (c.o_bias) out.push_back({p + "self_attn.o_proj.bias", {D}, l});
    out.push_back({p + "post_attention_layernorm.weight", {D}, l});
    if (c.sandwich_norms) out.push_back({p + "pre_feedforward_layernorm.weight", {D}, l});
    out.push_back({p + "mlp.gate_proj.weight", {I, D}, l});
    out.push_back({p + "mlp.up_proj.weight", {I, D}, l});
    if (c.mlp_bias) {
      out.push_back({p + "mlp.gate_proj.bias", {I}, l});
      out.push_back({p + "mlp.up_proj.bias", {I}, l});
    }
    out.push_back({p + "mlp.down_proj.weight", {D, I}, l});
    if (c.mlp_bias) out.push_back({p + "mlp.down_proj.bias", {D}, l});
    if (c.sandwich_norms) out.push_back({p + "post_feedforward_layernorm.weight", {D}, l});
  }
  if (last) {
    out.push_back({"model.norm.weight", {D}, -1});
    if (o.lm_head && !c.tie_word_embeddings) out.push_back({"lm_head.weight", {V, D}, -1});
    if (o.value_head) out.push_back({"score.weight", {1, D}, -1});
    if (o.value_head && o.value_bias) out.push_back({"score.bias", {1}, -1});
  }
  // Tensor parallelism: each rank holds a slice along one axis (model/tensor_parallel.hpp).
  for (Layout& t : out) {
    t.full_shape = t.shape;
    t.slice = tp_slice(c, t.name, t.full_shape, o.tp.size, o.tp.rank);
    if (t.slice.split()) t.shape[std::size_t(t.slice.axis)] = t.slice.end - t.slice.begin;
  }
  return out;
}

std::uint64_t name_stream(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) { h ^= ch; h *= 1099511628211ull; }
  return h;
}

}  // namespace

std::int64_t frozen_gradient_scratch(const ModelConfig& cfg, const ModelOptions& opt) {
  // What the backward of a frozen base still writes: the norms' gains and the value head
  // (one row), never a matrix's, the embedding's or the LM head's gradient.
  std::int64_t most = 0;
  for (const Layout& t : tensor_layout(cfg, opt)) {
    if (t.shape.size() != 1 && t.shape[0] != 1) continue;
    std::int64_t k = 1;
    for (auto d : t.shape) k *= d;
    most = std::max(most, k);
  }
  return most;
}

std::vector<TensorInfo> tensor_layout(const ModelConfig& cfg, const ModelOptions& opt) {
  return layout(cfg, opt, opt.layers.begin, opt.layers.end < 0 ? cfg.num_hidden_layers : opt.layers.end);
}

std::int64_t parameter_count(const ModelConfig& cfg, const ModelOptions& opt) {
  const int end = opt.layers.end < 0 ? cfg.num_hidden_layers : opt.layers.end;
  std::int64_t n = 0;
  for (const Layout& t : layout(cfg, opt, opt.layers.begin, end)) {
    std::int64_t k = 1;
    for (auto d : t.shape) k *= d;
    n += k;
  }
  return n;
}

template <typename T>
BasicModel<T>::BasicModel(const ModelConfig& cfg, const ModelOptions& opt, backend::Backend& be)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = cfg;
  m.opt = opt;
  m.be = &be;
  m.ops = &be.template ops<T>();
  m.begin = opt.layers.begin;
  m.end = opt.layers.end < 0 ? cfg.num_hidden_layers : opt.layers.end;
  if (m.begin < 0 || m.begin >= m.end || m.end > cfg.num_hidden_layers)
    throw std::invalid_argument(fmt::format("layer range [{}, {}) is not inside a model of {} layers", m.begin,
                                            m.end, cfg.num_hidden_layers));
  if (cfg.hidden_size <= 0 || cfg.num_attention_heads <= 0 || cfg.num_key_value_heads <= 0 ||
      cfg.num_attention_heads % cfg.num_key_value_heads != 0 ||
      (cfg.head_dim_override == 0 && cfg.hidden_size % cfg.num_attention_heads != 0) || cfg.head_dim() % 2 != 0 ||
      (cfg.sliding_window > 0 && int(cfg.sliding_layers.size()) != cfg.num_hidden_layers))
    throw std::invalid_argument("model config has inconsistent head counts or sizes");
  check_tensor_parallel(cfg, opt.tp.size);
  if (opt.tp.rank < 0 || opt.tp.rank >= opt.tp.size)
    throw std::invalid_argument(fmt::format("tp rank {} is not in [0, {})", opt.tp.rank, opt.tp.size));
  if (opt.tp.group && (opt.tp.group->size() != opt.tp.size || opt.tp.group->rank() != opt.tp.rank))
    throw std::invalid_argument(fmt::format("tp rank {} of {} given a group where it is rank {} of {}", opt.tp.rank,
                                            opt.tp.size, opt.tp.group->rank(), opt.tp.group->size()));
  m.heads = cfg.num_attention_heads / opt.tp.size;
  m.kv_heads = cfg.num_key_value_heads / opt.tp.size;
  {
    const auto [ib, ie] = split_range(cfg.intermediate_size, opt.tp.size, opt.tp.rank);
    m.inter = ie - ib;
    std::tie(m.vocab_begin, m.vocab_end) = split_range(cfg.vocab_size, opt.tp.size, opt.tp.rank);
  }

  // f32 stands for the model's own type (f64 in the double-precision gradient checks).
  const backend::DType own = backend::dtype_of<T>();
  if (opt.dtype == backend::DType::f32) m.opt.dtype = own;
  if (m.opt.dtype != own && m.opt.dtype != backend::DType::bf16)
    throw std::invalid_argument(fmt::format("a model of {} takes weights stored as {} or bf16, not {}",
                                            backend::dtype_name(own), backend::dtype_name(own),
                                            backend::dtype_name(opt.dtype)));
  const std::vector<Layout> lay = layout(cfg, opt, m.begin, m.end);
  std::int64_t total = 0;
  for (const Layout& t : lay) {
    std::int64_t k = 1;
    for (auto d : t.shape) k *= d;
    total += k;
  }
  const std::size_t elem = backend::dtype_size(m.opt.dtype);
  m.count = total;
  m.params = backend::Buffer<std::byte>(be, std::size_t(total) * elem);
  // A frozen base (LoRA) has no gradients: what the backward and the heads still write for
  // its tensors (norm gains, the value head) goes to one scratch, shared and never read.
  const bool frozen = opt.lora.enabled();
  m.grads = backend::Buffer<T>(be, std::size_t(frozen ? frozen_gradient_scratch(cfg, opt) : total));
  std::int64_t off = 0;
  for (const Layout& t : lay) {
    Tensor<T> x{t.name, t.shape, nullptr, m.grads.data() + (frozen ? 0 : off), 1, t.layer};
    x.dtype = m.opt.dtype;
    x.full_shape = t.full_shape;
    x.slice = t.slice;
    x.weights = m.params.data() + std::size_t(off) * elem;
    if (m.opt.dtype == own) x.data = static_cast<T*>(x.weights);
    for (auto d : t.shape) x.numel *= d;
    off += x.numel;
    m.tensors.push_back(std::move(x));
  }

  m.w.resize(std::size_t(m.layers()));
  m.g.resize(std::size_t(m.layers()));
  for (const Tensor<T>& t : m.tensors) {
    const backend::Weights wt = t.operand();
    if (t.layer >= 0) {
      const auto i = std::size_t(t.layer - m.begin);
      LayerWeights<backend::Weights>& w = m.w[i];
      LayerWeights<T*>& g = m.g[i];
      auto set = [&](backend::Weights& wp, T*& gp) { wp = wt; gp = t.grad; };
      if (t.name.ends_with("input_layernorm.weight")) set(w.ln1, g.ln1);
      else if (t.name.ends_with("q_proj.weight")) set(w.qkv, g.qkv);
      else if (t.name.ends_with("q_proj.bias")) set(w.qkv_bias, g.qkv_bias);
      else if (t.name.ends_with("q_norm.weight")) set(w.q_norm, g.q_norm);
      else if (t.name.ends_with("k_norm.weight")) set(w.k_norm, g.k_norm);
      else if (t.name.ends_with("o_proj.weight")) set(w.o, g.o);
      else if (t.name.ends_with("o_proj.bias")) set(w.o_bias, g.o_bias);
      else if (t.name.ends_with("post_attention_layernorm.weight") && cfg.sandwich_norms) set(w.attn_norm, g.attn_norm);
      else if (t.name.ends_with("post_attention_layernorm.weight")) set(w.ln2, g.ln2);
      else if (t.name.ends_with("pre_feedforward_layernorm.weight")) set(w.ln2, g.ln2);
      else if (t.name.ends_with("gate_proj.weight")) set(w.gate_up, g.gate_up);
      else if (t.name.ends_with("gate_proj.bias")) set(w.gate_up_bias, g.gate_up_bias);
      else if (t.name.ends_with("down_proj.weight")) set(w.down, g.down);
      else if (t.name.ends_with("down_proj.bias")) set(w.down_bias, g.down_bias);
      else if (t.name.ends_with("post_feedforward_layernorm.weight")) set(w.mlp_norm, g.mlp_norm);
    } else if (t.name == "model.embed_tokens.weight") {
      m.embed = wt;
      m.embed_g = t.grad;
    } else if (t.name == "model.norm.weight") {
      m.norm = wt;
      m.norm_g = t.grad;
    } else if (t.name == "lm_head.weight") {
      m.head = wt;
      m.head_g = t.grad;
    } else if (t.name == "score.weight") {
      m.score = wt;
      m.score_g = t.grad;
    } else if (t.name == "score.bias") {
      m.score_bias = wt;
      m.score_bias_g = t.grad;
    }
  }
  if (m.last() && opt.lm_head && cfg.tie_word_embeddings) {
    m.head = m.embed;
    m.head_g = m.embed_g;
  }
  if (!m.first()) {
    // The embedding copy of a tied last stage is its head, not an input layer.
    if (!(m.last() && opt.lm_head && cfg.tie_word_embeddings)) { m.embed = {}; m.embed_g = nullptr; }
  }

  // Rotary tables in double from Hugging Face's inv_freq (θ^(−2j/d), rope_scaling applied),
  // times the rope's attention factor (yarn): cos and sin of every position.
  auto tables = [&](bool local, backend::Buffer<T>& cos_out, backend::Buffer<T>& sin_out) {
    const int half = cfg.head_dim() / 2;
    const std::int64_t P = cfg.max_position_embeddings;
    const std::vector<double> inv_freq = rope_inv_freq(cfg, local);
    const double factor = rope_attention_factor(cfg, local);
    std::vector<T> c(std::size_t(P * half)), s(std::size_t(P * half));
    for (std::int64_t p = 0; p < P; ++p)
      for (int j = 0; j < half; ++j) {
        c[std::size_t(p * half + j)] = T(std::cos(double(p) * inv_freq[std::size_t(j)]) * factor);
        s[std::size_t(p * half + j)] = T(std::sin(double(p) * inv_freq[std::size_t(j)]) * factor);
      }
    cos_out = backend::Buffer<T>(be, c.size());
    sin_out = backend::Buffer<T>(be, s.size());
    be.copy_to_device(cos_out.data(), c.data(), c.size() * sizeof(T));
    be.copy_to_device(sin_out.data(), s.data(), s.size() * sizeof(T));
  };
  tables(false, m.cos, m.sin);
  if (cfg.has_local_rope() && cfg.sliding_window > 0) tables(true, m.cos_local, m.sin_local);
  build_lora<T>(m);
}

template <typename T> BasicModel<T>::~BasicModel() = default;
template <typename T> BasicModel<T>::BasicModel(BasicModel&&) noexcept = default;
template <typename T> BasicModel<T>& BasicModel<T>::operator=(BasicModel&&) noexcept = default;

template <typename T> const ModelConfig& BasicModel<T>::config() const { return impl_->cfg; }
template <typename T> const ModelOptions& BasicModel<T>::options() const { return impl_->opt; }
template <typename T> backend::Backend& BasicModel<T>::backend() const { return *impl_->be; }
template <typename T> int BasicModel<T>::layer_begin() const { return impl_->begin; }
template <typename T> int BasicModel<T>::layer_end() const { return impl_->end; }
template <typename T> bool BasicModel<T>::is_first_stage() const { return impl_->first(); }
template <typename T> bool BasicModel<T>::is_last_stage() const { return impl_->last(); }
template <typename T> const TensorParallel& BasicModel<T>::tensor_parallel() const { return impl_->opt.tp; }
template <typename T>
std::pair<std::int64_t, std::int64_t> BasicModel<T>::vocab_slice() const {
  return {impl_->vocab_begin, impl_->vocab_end};
}
template <typename T> std::vector<Tensor<T>>& BasicModel<T>::tensors() { return impl_->tensors; }
template <typename T> const std::vector<Tensor<T>>& BasicModel<T>::tensors() const { return impl_->tensors; }
template <typename T>
std::span<T> BasicModel<T>::parameters() {
  if (impl_->opt.dtype != backend::dtype_of<T>())
    throw std::logic_error(fmt::format("parameters(): the model stores its weights as {}",
                                       backend::dtype_name(impl_->opt.dtype)));
  return {reinterpret_cast<T*>(impl_->params.data()), std::size_t(impl_->count)};
}
template <typename T> std::span<T> BasicModel<T>::gradients() { return {impl_->grads.data(), impl_->grads.size()}; }
template <typename T> std::int64_t BasicModel<T>::parameter_count() const { return impl_->count; }
template <typename T> backend::DType BasicModel<T>::dtype() const { return impl_->opt.dtype; }
template <typename T> std::int64_t BasicModel<T>::parameter_bytes() const { return std::int64_t(impl_->params.size()); }

template <typename T>
void read_values(backend::Backend& be, const Tensor<T>& t, T* host) {
  const std::size_t n = std::size_t(t.numel);
  if (t.data) {
    be.copy_to_host(host, t.data, n * sizeof(T));
    return;
  }
  std::vector<std::uint16_t> bits(n);
  be.copy_to_host(bits.data(), t.weights, n * backend::dtype_size(t.dtype));
  if (t.dtype != backend::DType::bf16) throw std::logic_error("read_values: unexpected storage type");
  for (std::size_t i = 0; i < n; ++i) host[i] = T(backend::bf16_to_float(bits[i]));
}

template <typename T>
void write_values(backend::Backend& be, Tensor<T>& t, const T* host) {
  const std::size_t n = std::size_t(t.numel);
  if (t.data) be.copy_to_device(t.data, host, n * sizeof(T));
  if (t.dtype == backend::dtype_of<T>()) return;
  if (t.dtype != backend::DType::bf16) throw std::logic_error("write_values: unexpected storage type");
  std::vector<std::uint16_t> bits(n);
  for (std::size_t i = 0; i < n; ++i) bits[i] = backend::float_to_bf16(float(host[i]));
  be.copy_to_device(t.weights, bits.data(), n * sizeof(std::uint16_t));
}

template <typename T>
std::vector<T> whole_values(backend::Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                            const Tensor<T>& t) {
  std::vector<T> part(std::size_t(t.numel));
  read_values(be, t, part.data());
  if (tp.size == 1 || !t.slice.split()) return part;
  if (!tp.group) throw std::logic_error("whole_values: a tensor-parallel model without its tp group");
  // Rank r's slice lies at the sum of the slices before it.
  std::vector<TpSlice> slices;
  std::vector<std::size_t> counts;
  std::size_t mine = 0;
  for (int r = 0; r < tp.size; ++r) {
    slices.push_back(tp_slice(cfg, t.name, t.full_shape, tp.size, r));
    const std::int64_t other = t.full_shape.size() == 2 ? t.full_shape[std::size_t(1 - slices.back().axis)] : 1;
    if (r < tp.rank) mine += std::size_t((slices.back().end - slices.back().begin) * other);
    counts.push_back(std::size_t((slices.back().end - slices.back().begin) * other));
  }
  std::vector<T> all(std::accumulate(counts.begin(), counts.end(), std::size_t{0}));
  std::copy(part.begin(), part.end(), all.begin() + std::ptrdiff_t(mine));
  tp.group->all_gather_varying(std::span<T>(all), counts);
  std::int64_t n = 1;
  for (auto d : t.full_shape) n *= d;
  std::vector<T> whole(static_cast<std::size_t>(n));
  std::size_t off = 0;
  for (int r = 0; r < tp.size; ++r) {
    insert_slice(whole.data(), t.full_shape, slices[std::size_t(r)], all.data() + off);
    off += counts[std::size_t(r)];
  }
  return whole;
}

template <typename T>
Tensor<T>* BasicModel<T>::find(const std::string& hf_name) {
  for (Tensor<T>& t : impl_->tensors)
    if (t.name == hf_name) return &t;
  return nullptr;
}

template <typename T>
void BasicModel<T>::init_random(std::uint64_t seed, double std) {
  Impl& m = *impl_;
  std::vector<T> host;
  for (Tensor<T>& t : m.tensors) {
    host.assign(std::size_t(t.numel), T(0));
    if (t.name.ends_with(".bias")) {
      // zeros
    } else if (t.shape.size() == 1) {
      std::fill(host.begin(), host.end(), T(1.0 - m.cfg.norm_weight_offset));   // a gain of one
    } else {
      // The whole tensor's values, then this rank's slice: the same weights at any tp.
      std::int64_t full = 1;
      for (auto d : t.full_shape) full *= d;
      std::vector<T> all(static_cast<std::size_t>(full));
      Rng rng(seed, name_stream(t.name));
      for (T& x : all) x = T(rng.normal() * std);
      host = extract_slice(all.data(), t.full_shape, t.slice);
    }
    write_values(*m.be, t, host.data());
  }
}

template <typename T>
void BasicModel<T>::zero_grad() {
  impl_->grads.zero();
  impl_->lora_grads.zero();
  impl_->lora_partial.zero();
}

template <typename T>
backend::Weights BasicModel<T>::lm_head_weight() const { return impl_->head; }
template <typename T>
T* BasicModel<T>::lm_head_grad() { return impl_->frozen() ? nullptr : impl_->head_g; }

template <typename T>
void BasicModel<T>::lm_logits(const T* hidden, std::int64_t rows, T* logits) const {
  const Impl& m = *impl_;
  if (!m.head) throw std::logic_error("lm_logits: this stage has no LM head");
  const std::int64_t D = m.cfg.hidden_size, V = m.cfg.vocab_size;
  const double cap = m.cfg.final_logit_softcapping;
  if (!m.tp_split()) {
    m.ops->gemm(false, true, rows, V, D, T(1), hidden, D, m.head, D, T(0), logits, V);
    if (cap > 0) m.ops->softcap(rows * V, cap, logits);
    return;
  }
  // Vocabulary-parallel head: each rank's columns of the logits, gathered (what sampling
  // reads; the log-probabilities of training never gather them: rl::ChunkedLmHead).
  const TensorParallel& tp = m.tp();
  if (!tp.group) throw std::logic_error("a tensor-parallel model without its tp group cannot run");
  const std::int64_t Vl = m.vocab_end - m.vocab_begin;
  backend::Buffer<T> part(*m.be, std::size_t(rows * Vl));
  m.ops->gemm(false, true, rows, Vl, D, T(1), hidden, D, m.head, D, T(0), part.data(), Vl);
  if (cap > 0) m.ops->softcap(rows * Vl, cap, part.data());
  // Rank r's part [rows × V_r] lies at rows · (its first vocabulary row).
  std::vector<T> parts(std::size_t(rows * V)), out(std::size_t(rows * V));
  m.be->copy_to_host(parts.data() + rows * m.vocab_begin, part.data(), std::size_t(rows * Vl) * sizeof(T));
  std::vector<std::size_t> counts;
  for (int r = 0; r < tp.size; ++r) {
    const auto [b, e] = split_range(V, tp.size, r);
    counts.push_back(std::size_t(rows * (e - b)));
  }
  tp.group->all_gather_varying(std::span<T>(parts), counts);
  for (int r = 0; r < tp.size; ++r) {
    const auto [b, e] = split_range(V, tp.size, r);
    const T* src = parts.data() + rows * b;
    for (std::int64_t i = 0; i < rows; ++i) std::copy_n(src + i * (e - b), e - b, out.data() + i * V + b);
  }
  m.be->copy_to_device(logits, out.data(), out.size() * sizeof(T));
}

template <typename T>
void BasicModel<T>::values(const BasicActivations<T>& acts, T* values) const {
  const Impl& m = *impl_;
  if (!m.score) throw std::logic_error("values: this stage has no value head");
  const std::int64_t D = m.cfg.hidden_size, n = acts.impl_->n_out;
  m.ops->gemm(false, true, n, 1, D, T(1), acts.output(), D, m.value_w(), D, T(0), values, 1);
  if (m.score_bias)
    m.ops->gemm(false, false, n, 1, 1, T(1), acts.impl_->ones.data(), 1, m.value_bias_w(), 1, T(1), values, 1);
}

template <typename T>
void BasicModel<T>::values_backward(BasicActivations<T>& acts, const T* d_values) {
  Impl& m = *impl_;
  if (!m.score) throw std::logic_error("values_backward: this stage has no value head");
  const std::int64_t D = m.cfg.hidden_size, N = acts.impl_->n;
  m.ops->gemm(false, false, N, D, 1, T(1), d_values, 1, m.value_w(), D, T(1), acts.output_grad(), D);
  m.ops->gemm(true, false, 1, D, N, T(1), d_values, 1, acts.output(), D, T(1), m.value_g(), D);
  if (m.score_bias)
    m.ops->gemm(true, false, 1, 1, N, T(1), d_values, 1, acts.impl_->ones.data(), 1, T(1), m.value_bias_g(), 1);
}

template class BasicModel<float>;
template class BasicModel<double>;
template void read_values<float>(backend::Backend&, const Tensor<float>&, float*);
template void read_values<double>(backend::Backend&, const Tensor<double>&, double*);
template void write_values<float>(backend::Backend&, Tensor<float>&, const float*);
template void write_values<double>(backend::Backend&, Tensor<double>&, const double*);
template std::vector<float> whole_values<float>(backend::Backend&, const TensorParallel&, const ModelConfig&,
                                                const Tensor<float>&);
template std::vector<double> whole_values<double>(backend::Backend&, const TensorParallel&, const ModelConfig&,
                                                  const Tensor<double>&);

}  // namespace braid::model
