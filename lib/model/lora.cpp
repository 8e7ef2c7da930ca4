// LoRA adapters: their options, their layout beside the base model, the forward and
// backward of each adapter, initialisation and merging into the base weights.
#include "model/model_impl.hpp"

#include "backend/dropout_draw.hpp"
#include "core/rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

namespace braid::model {

const std::vector<std::string>& lora_modules() {
  static const std::vector<std::string> names{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names;
}

double LoraOptions::scaling() const {
  if (rank <= 0) return 0;
  return rslora ? alpha / std::sqrt(double(rank)) : alpha / double(rank);
}

bool LoraOptions::targets_module(const std::string& module) const {
  return targets.empty() || std::find(targets.begin(), targets.end(), module) != targets.end();
}

std::vector<std::string> parse_lora_targets(const std::string& list) {
  std::vector<char> wanted(lora_modules().size(), 0);
  bool any = false;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, comma - start);
    start = comma + 1;
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    any = true;
    if (item == "all") {
      std::fill(wanted.begin(), wanted.end(), 1);
      continue;
    }
    const std::string module = item.ends_with("_proj") ? item : item + "_proj";
    const auto it = std::find(lora_modules().begin(), lora_modules().end(), module);
    if (it == lora_modules().end())
      throw std::invalid_argument(fmt::format("no linear layer {} for an adapter (q, k, v, o, gate, up, down)", item));
    wanted[std::size_t(it - lora_modules().begin())] = 1;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < wanted.size(); ++i)
    if (!any || wanted[i]) out.push_back(lora_modules()[i]);
  return out;
}

namespace {
std::vector<std::string> modules_of(const LoraOptions& o) { return o.targets.empty() ? lora_modules() : o.targets; }
}  // namespace

bool same_adapters(const LoraOptions& a, const LoraOptions& b) {
  return a.rank == b.rank && a.alpha == b.alpha && a.rslora == b.rslora && modules_of(a) == modules_of(b) &&
         a.value_head == b.value_head && a.dropout == b.dropout;
}

std::string describe(const LoraOptions& o) {
  std::string modules;
  for (const std::string& m : modules_of(o)) modules += (modules.empty() ? "" : ",") + m;
  return fmt::format("rank {}, alpha {:g}{}{} on {}{}", o.rank, o.alpha, o.rslora ? ", rsLoRA" : "",
                     o.dropout > 0 ? fmt::format(", dropout {:g}", o.dropout) : "", modules,
                     o.value_head ? ", the value head trained" : "");
}

void check_lora(const LoraOptions& o) {
  if (o.rank < 0 || o.rank > kMaxLoraRank)
    throw std::invalid_argument(fmt::format("LoRA rank must be in [0, {}], not {}", kMaxLoraRank, o.rank));
  if (!o.enabled()) return;
  if (!(o.alpha > 0 && o.alpha <= kMaxLoraAlpha))
    throw std::invalid_argument(fmt::format("LoRA alpha must be in (0, {:g}], not {}", kMaxLoraAlpha, o.alpha));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw std::invalid_argument(fmt::format("LoRA dropout must be in [0, 1), not {}", o.dropout));
  for (const std::string& t : o.targets)
    if (std::find(lora_modules().begin(), lora_modules().end(), t) == lora_modules().end())
      throw std::invalid_argument(fmt::format("no linear layer {} for an adapter", t));
}

namespace {

// One adapted module of a layer: its Hugging Face block, where it adds, its sizes at tp 1.
struct Module {
  const char* name;
  const char* block;
  LoraSite site;
  std::int64_t in, out, col;
};

std::vector<Module> adapted_modules(const ModelConfig& c, const LoraOptions& lo, std::int64_t heads,
                                    std::int64_t kv_heads, std::int64_t I) {
  const std::int64_t D = c.hidden_size, hd = c.head_dim(), q = heads * hd, kv = kv_heads * hd;
  const Module all[] = {{"q_proj", "self_attn", LoraSite::qkv, D, q, 0},
                        {"k_proj", "self_attn", LoraSite::qkv, D, kv, q},
                        {"v_proj", "self_attn", LoraSite::qkv, D, kv, q + kv},
                        {"o_proj", "self_attn", LoraSite::o, q, D, 0},
                        {"gate_proj", "mlp", LoraSite::gate_up, D, I, 0},
                        {"up_proj", "mlp", LoraSite::gate_up, D, I, I},
                        {"down_proj", "mlp", LoraSite::down, I, D, 0}};
  std::vector<Module> out;
  if (!lo.enabled()) return out;
  for (const Module& m : all)
    if (lo.targets_module(m.name)) out.push_back(m);
  return out;
}

// The value head's trained copy (LoraOptions::value_head) on the stage, as the base names it:
// score.weight [1 × D] and, where the base has one, score.bias [1].
std::vector<TensorInfo> head_copies(const ModelConfig& c, const ModelOptions& o) {
  const int end = o.layers.end < 0 ? c.num_hidden_layers : o.layers.end;
  std::vector<TensorInfo> out;
  if (!o.lora.enabled() || !o.lora.value_head || !o.value_head || end != c.num_hidden_layers) return out;
  out.push_back(
      {.name = "score.weight", .shape = {1, c.hidden_size}, .layer = -1, .full_shape = {1, c.hidden_size}, .slice = {}});
  if (o.value_bias) out.push_back({.name = "score.bias", .shape = {1}, .layer = -1, .full_shape = {1}, .slice = {}});
  return out;
}

std::int64_t numel_of(const TensorInfo& t) {
  std::int64_t n = 1;
  for (auto d : t.shape) n *= d;
  return n;
}

}  // namespace

std::int64_t adapter_columns(const ModelOptions& opt) {
  if (!opt.lora.enabled()) return 0;
  std::int64_t n = 0;
  for (const std::string& name : lora_modules()) n += opt.lora.targets_module(name);
  return n * opt.lora.rank;
}

std::vector<TensorInfo> adapter_layout(const ModelConfig& cfg, const ModelOptions& opt) {
  const int end = opt.layers.end < 0 ? cfg.num_hidden_layers : opt.layers.end;
  const std::int64_t r = opt.lora.rank;
  std::vector<TensorInfo> out;
  for (int l = opt.layers.begin; l < end; ++l) {
    for (const Module& mod : adapted_modules(cfg, opt.lora, cfg.num_attention_heads, cfg.num_key_value_heads,
                                             cfg.intermediate_size)) {
      const std::string base = fmt::format("model.layers.{}.{}.{}.", l, mod.block, mod.name);
      for (auto [name, full] : {std::pair{base + "lora_A.weight", std::vector<std::int64_t>{r, mod.in}},
                                std::pair{base + "lora_B.weight", std::vector<std::int64_t>{mod.out, r}}}) {
        // Under tp this rank's slice of the whole adapter (model/tensor_parallel.hpp).
        const TpSlice slice = tp_slice(cfg, name, full, opt.tp.size, opt.tp.rank);
        std::vector<std::int64_t> shape = full;
        if (slice.split()) shape[std::size_t(slice.axis)] = slice.end - slice.begin;
        out.push_back({.name = name, .shape = shape, .layer = l, .full_shape = full, .slice = slice});
      }
    }
  }
  for (TensorInfo& t : head_copies(cfg, opt)) out.push_back(std::move(t));
  return out;
}

std::int64_t adapter_count(const ModelConfig& cfg, const ModelOptions& opt) {
  std::int64_t n = 0;
  for (const TensorInfo& t : adapter_layout(cfg, opt)) n += numel_of(t);
  return n;
}

std::int64_t adapter_partial_count(const ModelConfig& cfg, const ModelOptions& opt) {
  if (opt.tp.size == 1) return 0;
  std::int64_t n = 0;
  for (const TensorInfo& t : adapter_layout(cfg, opt))
    if (t.layer >= 0 && !t.slice.split()) n += numel_of(t);
  return n;
}

template <typename T>
void build_lora(typename BasicModel<T>::Impl& m) {
  const LoraOptions& lo = m.opt.lora;
  check_lora(lo);
  if (!lo.enabled()) return;
  if (lo.value_head && !m.opt.value_head)
    throw std::invalid_argument("LoRA: the value head is to be trained, but the model has none");
  // The modules as this rank holds them: their sizes and columns in the fused products.
  const std::vector<Module> modules = adapted_modules(m.cfg, lo, m.heads, m.kv_heads, m.inter);
  const std::vector<TensorInfo> layout = adapter_layout(m.cfg, m.opt);
  const std::int64_t total = adapter_count(m.cfg, m.opt);
  m.lora_cols = adapter_columns(m.opt);
  m.lora_params = backend::Buffer<T>(*m.be, std::size_t(total));
  m.lora_grads = backend::Buffer<T>(*m.be, std::size_t(total));
  m.lora_partial = backend::Buffer<T>(*m.be, std::size_t(adapter_partial_count(m.cfg, m.opt)));
  m.lora.resize(std::size_t(m.layers()));
  std::int64_t off = 0, partial_off = 0;
  std::size_t next = 0;
  // The next tensor of the layout, placed in the buffers; its gradient where the backward
  // writes it: under tp a replicated adapter's (each rank's part of the whole gradient) in
  // lora_partial, summed over the group into its gradient after each backward.
  auto tensor = [&](std::uint64_t stream) {
    const TensorInfo& info = layout.at(next++);
    const std::int64_t n = numel_of(info);
    Tensor<T> t{info.name, info.shape, m.lora_params.data() + off, m.lora_grads.data() + off, n, info.layer};
    t.weights = t.data;
    t.full_shape = info.full_shape;
    t.slice = info.slice;
    off += n;
    m.adapters.push_back(t);
    m.adapter_streams.push_back(stream);
    T* written = t.grad;
    if (m.tp_split() && info.layer >= 0 && !info.slice.split()) {
      written = m.lora_partial.data() + partial_off;
      m.lora_partial_of.push_back({written, t.grad, n});
      partial_off += n;
    }
    return std::pair{t, written};
  };
  const std::uint64_t per_layer = 2 * modules.size();
  for (int l = 0; l < m.layers(); ++l) {
    std::int64_t u = 0;
    for (std::size_t j = 0; j < modules.size(); ++j) {
      const Module& mod = modules[j];
      // A seed stream per tensor of the whole model: the same values whatever the stage.
      const std::uint64_t stream = std::uint64_t(m.begin + l) * per_layer + 2 * j;
      const auto [a, dA] = tensor(stream);
      const auto [b, dB] = tensor(stream + 1);
      m.lora[std::size_t(l)][std::size_t(mod.site)].push_back(
          {.A = a.data, .B = b.data, .dA = dA, .dB = dB, .in = mod.in, .out = mod.out, .col = mod.col, .u = u,
           .draw = stream / 2, .in_begin = a.slice.split() ? a.slice.begin : 0});
      u += lo.rank;
    }
  }
  while (next < layout.size()) {   // the value head's copy
    const std::string name = layout[next].name;
    const Tensor<T> t = tensor(0).first;
    (name == "score.weight" ? m.score_copy : m.score_bias_copy) = backend::Weights(t.data, backend::dtype_of<T>());
    (name == "score.weight" ? m.score_copy_g : m.score_bias_copy_g) = t.grad;
  }
}

template <typename T>
void lora_reduce_partials(typename BasicModel<T>::Impl& m) {
  if (!m.adapting() || m.lora_partial_of.empty()) return;
  tp_all_reduce(*m.be, m.tp(), m.lora_partial.data(), std::int64_t(m.lora_partial.size()));
  for (const auto& p : m.lora_partial_of) m.ops->axpy(p.n, T(1), p.part, p.grad);
  m.lora_partial.zero();
}

namespace {

// LoRA dropout of adapter p's input (or of the gradient through it) into a.lora_xd: the
// mask of the forward's draw (its seed and row keys), the adapter and the whole model's
// columns, so that the backward masks as the forward did, at any tp.
template <typename T>
const T* masked(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, const LoraPiece<T>& p,
                const T* x, std::int64_t ldx) {
  if (ldx != p.in) throw std::logic_error("LoRA dropout: an adapter's input rows are not contiguous");
  const std::uint64_t seed = backend::mix64(a.dropout_seed ^ backend::mix64(p.draw + 1));
  m.ops->dropout(a.n, p.in, x, a.row_keys.data(), p.in_begin, seed, m.opt.lora.dropout, a.lora_xd.data());
  return a.lora_xd.data();
}

}  // namespace

template <typename T>
void lora_forward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l, LoraSite site,
                  const T* x, std::int64_t ldx, T* y, std::int64_t ldy) {
  if (!m.adapting()) return;
  const std::int64_t N = a.n, r = m.opt.lora.rank, C = m.lora_cols;
  const T s = T(m.opt.lora.scaling());
  T* u = a.lora_u.data() + a.slot(l) * a.max_tokens * C;
  for (const LoraPiece<T>& p : m.lora[std::size_t(l)][std::size_t(site)]) {
    const T* in = a.dropout_on ? masked<T>(m, a, p, x, ldx) : x;
    m.ops->gemm(false, true, N, r, p.in, T(1), in, a.dropout_on ? p.in : ldx, p.A, p.in, T(0), u + p.u, C);
    m.ops->gemm(false, true, N, p.out, r, s, u + p.u, C, p.B, r, T(1), y + p.col, ldy);
  }
}

template <typename T>
void lora_backward(const typename BasicModel<T>::Impl& m, typename BasicActivations<T>::Impl& a, int l, LoraSite site,
                   const T* x, std::int64_t ldx, const T* dy, std::int64_t ldy, T* dx) {
  if (!m.adapting()) return;
  const std::int64_t N = a.n, r = m.opt.lora.rank, C = m.lora_cols;
  const T s = T(m.opt.lora.scaling());
  const T* u = a.lora_u.data() + a.slot(l) * a.max_tokens * C;
  T* du = a.lora_du.data();
  for (const LoraPiece<T>& p : m.lora[std::size_t(l)][std::size_t(site)]) {
    const T* dyp = dy + p.col;
    m.ops->gemm(true, false, p.out, r, N, s, dyp, ldy, u + p.u, C, T(1), p.dB, r);    // dB += s·dyᵀ·u
    m.ops->gemm(false, false, N, r, p.out, s, dyp, ldy, p.B, r, T(0), du, r);         // du = s·dy·B
    if (!a.dropout_on) {
      m.ops->gemm(true, false, r, p.in, N, T(1), du, r, x, ldx, T(1), p.dA, p.in);    // dA += duᵀ·x
      m.ops->gemm(false, false, N, p.in, r, T(1), du, r, p.A, p.in, T(1), dx, ldx);   // dx += du·A
      continue;
    }
    // Dropout: the input the adapter saw was x·mask/(1 − p), drawn again here.
    m.ops->gemm(true, false, r, p.in, N, T(1), du, r, masked<T>(m, a, p, x, ldx), p.in, T(1), p.dA, p.in);
    T* dxd = a.lora_xd.data();
    m.ops->gemm(false, false, N, p.in, r, T(1), du, r, p.A, p.in, T(0), dxd, p.in);   // du·A, then masked
    masked<T>(m, a, p, dxd, p.in);
    m.ops->axpy(N * p.in, T(1), dxd, dx);
  }
}

template <typename T>
std::vector<Tensor<T>>& BasicModel<T>::adapters() { return impl_->adapters; }

template <typename T>
std::span<T> BasicModel<T>::adapter_gradients() { return {impl_->lora_grads.data(), impl_->lora_grads.size()}; }

template <typename T>
void BasicModel<T>::init_adapters(std::uint64_t seed, double b_std) {
  Impl& m = *impl_;
  std::vector<T> host, all;
  for (std::size_t i = 0; i < m.adapters.size(); ++i) {
    Tensor<T>& t = m.adapters[i];
    host.assign(std::size_t(t.numel), T(0));
    if (t.layer < 0) {   // the value head's copy starts as the base's head
      read_values(*m.be, *find(t.name), host.data());
    } else if (t.name.ends_with("lora_A.weight") || b_std > 0) {
      // The whole tensor's values, then this rank's slice: the same adapters at any tp.
      const bool a = t.name.ends_with("lora_A.weight");
      all.resize(std::size_t(t.full_shape[0] * t.full_shape[1]));
      Rng rng(seed, 0x10aa0000ull + m.adapter_streams[i]);
      const double bound = 1.0 / std::sqrt(double(t.full_shape[1]));
      for (T& v : all) v = a ? T((2 * rng.uniform() - 1) * bound) : T(rng.normal() * b_std);
      host = extract_slice(all.data(), t.full_shape, t.slice);
    }
    m.be->copy_to_device(t.data, host.data(), host.size() * sizeof(T));
  }
}

template <typename T>
void BasicModel<T>::set_adapters_enabled(bool on) { impl_->adapters_on = on; }

template <typename T>
bool BasicModel<T>::adapters_enabled() const { return impl_->adapters_on && impl_->lora_cols > 0; }

template <typename T>
void BasicModel<T>::merge_adapters() {
  Impl& m = *impl_;
  if (!m.adapting()) return;
  const double s = m.opt.lora.scaling();
  std::vector<T> A, B, w;
  for (const Tensor<T>& t : m.adapters) {   // the value head: its trained copy replaces the base's
    if (t.layer >= 0) continue;
    w.resize(std::size_t(t.numel));
    m.be->copy_to_host(w.data(), t.data, w.size() * sizeof(T));
    write_values(*m.be, *find(t.name), w.data());
  }
  for (std::size_t i = 0; i + 1 < m.adapters.size() && m.adapters[i].layer >= 0; i += 2) {
    const Tensor<T>& ta = m.adapters[i];
    const Tensor<T>& tb = m.adapters[i + 1];
    const std::string name = ta.name.substr(0, ta.name.size() - std::string("lora_A.weight").size()) + "weight";
    Tensor<T>* base = find(name);
    if (base == nullptr) throw std::logic_error("merge_adapters: no base tensor " + name);
    const std::int64_t r = ta.shape[0], in = ta.shape[1], out = tb.shape[0];
    A.resize(std::size_t(ta.numel));
    B.resize(std::size_t(tb.numel));
    w.resize(std::size_t(base->numel));
    m.be->copy_to_host(A.data(), ta.data, A.size() * sizeof(T));
    m.be->copy_to_host(B.data(), tb.data, B.size() * sizeof(T));
    read_values(*m.be, *base, w.data());
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t j = 0; j < in; ++j) {
        double d = 0;
        for (std::int64_t k = 0; k < r; ++k) d += double(B[std::size_t(o * r + k)]) * double(A[std::size_t(k * in + j)]);
        w[std::size_t(o * in + j)] = T(double(w[std::size_t(o * in + j)]) + s * d);
      }
    write_values(*m.be, *base, w.data());
  }
  m.adapters_on = false;
}

#define BRAID_LORA(T)                                                                                               \
  template void build_lora<T>(BasicModel<T>::Impl&);                                                               \
  template void lora_reduce_partials<T>(BasicModel<T>::Impl&);                                                     \
  template void lora_forward<T>(const BasicModel<T>::Impl&, BasicActivations<T>::Impl&, int, LoraSite, const T*,   \
                                std::int64_t, T*, std::int64_t);                                                    \
  template void lora_backward<T>(const BasicModel<T>::Impl&, BasicActivations<T>::Impl&, int, LoraSite, const T*,  \
                                 std::int64_t, const T*, std::int64_t, T*);                                         \
  template std::vector<Tensor<T>>& BasicModel<T>::adapters();                                                       \
  template std::span<T> BasicModel<T>::adapter_gradients();                                                         \
  template void BasicModel<T>::init_adapters(std::uint64_t, double);                                                \
  template void BasicModel<T>::set_adapters_enabled(bool);                                                          \
  template bool BasicModel<T>::adapters_enabled() const;                                                            \
  template void BasicModel<T>::merge_adapters();
BRAID_LORA(float)
BRAID_LORA(double)
#undef BRAID_LORA

}  // namespace braid::model
