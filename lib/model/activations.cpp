// The buffers of a micro-batch and of a KV cache, sized once and reused.
#include "model/model_impl.hpp"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>
#include <vector>

namespace braid::model {

template <typename T>
BasicActivations<T> BasicModel<T>::make_activations(const ActivationOptions& o) const {
  const Impl& m = *impl_;
  if (o.max_tokens <= 0 || o.max_sequences <= 0)
    throw std::invalid_argument("make_activations: max_tokens and max_sequences must be positive");
  auto a = std::make_unique<typename BasicActivations<T>::Impl>();
  backend::Backend& be = *m.be;
  const ModelConfig& c = m.cfg;
  a->be = &be;
  a->training = o.training;
  a->max_tokens = o.max_tokens;
  a->max_seqs = o.max_sequences;
  a->layers = m.layers();
  if (o.recompute < 0) throw std::invalid_argument("make_activations: recompute must be >= 0");
  a->slots = 1;
  if (o.training) {
    int kept = 0;
    for (int l = 0; l < m.layers(); ++l) {
      const bool again = recomputed_layer(m.begin + l, o.recompute);
      a->recompute.push_back(again);
      a->slot_of.push_back(again ? -1 : kept++);
    }
    a->slots = kept + (kept < m.layers() ? 1 : 0);
    for (int& s : a->slot_of) if (s < 0) s = kept;   // the recomputed layers' shared slot
  }
  a->D = c.hidden_size;
  // This tp rank's share of the heads and intermediate units (all of them at tp 1).
  a->QKV = int(m.qkv_rows());
  a->HD = m.heads * c.head_dim();
  a->H = m.heads;
  a->I = int(m.inter);
  a->V = c.vocab_size;
  // The logits of forward_cached (generation, scoring by decode); a training forward never
  // writes them (its log-probabilities go through rl::ChunkedLmHead).
  a->has_logits = m.last() && bool(m.head) && !o.training;
  a->segs.reserve(std::size_t(o.max_sequences));

  const std::size_t N = std::size_t(o.max_tokens), S = std::size_t(a->slots);
  const std::size_t D = std::size_t(a->D);
  a->tokens = backend::Buffer<std::int32_t>(be, N);
  a->pos = backend::Buffer<std::int32_t>(be, N);
  a->step = backend::Buffer<std::int32_t>(be, 5 * N);
  a->resid = backend::Buffer<T>(be, (o.training ? std::size_t(m.layers()) + 1 + S : 1) * N * D);
  a->ln1 = backend::Buffer<T>(be, S * N * D);
  a->rstd1 = backend::Buffer<T>(be, S * N);
  a->qkv = backend::Buffer<T>(be, S * N * std::size_t(a->QKV));
  a->att = backend::Buffer<T>(be, S * N * std::size_t(a->HD));
  a->lse = backend::Buffer<T>(be, S * N * std::size_t(a->H));
  a->ln2 = backend::Buffer<T>(be, S * N * D);
  a->rstd2 = backend::Buffer<T>(be, S * N);
  a->gate_up = backend::Buffer<T>(be, S * N * 2 * std::size_t(a->I));
  a->act = backend::Buffer<T>(be, S * N * std::size_t(a->I));
  if (c.qk_norm) {
    if (o.training) a->qkv_pre = backend::Buffer<T>(be, S * N * std::size_t(a->QKV));
    a->qk_rstd = backend::Buffer<T>(be, S * N * std::size_t(m.heads + m.kv_heads));
  }
  if (c.sandwich_norms) {
    a->attn_out = backend::Buffer<T>(be, S * N * D);
    a->rstd_ao = backend::Buffer<T>(be, S * N);
    a->mlp_out = backend::Buffer<T>(be, S * N * D);
    a->rstd_mo = backend::Buffer<T>(be, S * N);
    a->normed = backend::Buffer<T>(be, N * D);
  }
  if (m.lora_cols > 0) {
    a->lora_u = backend::Buffer<T>(be, S * N * std::size_t(m.lora_cols));
    if (o.training) a->lora_du = backend::Buffer<T>(be, N * std::size_t(m.opt.lora.rank));
    if (o.training && m.opt.lora.dropout > 0) {
      a->row_keys = backend::Buffer<std::uint64_t>(be, N);
      a->lora_xd = backend::Buffer<T>(be, N * std::size_t(m.lora_max_in()));
    }
  }
  if (m.biased()) {
    a->ones = backend::Buffer<T>(be, N);
    const std::vector<T> one(N, T(1));
    be.copy_to_device(a->ones.data(), one.data(), N * sizeof(T));
  }
  if (m.last()) {
    a->final_out = backend::Buffer<T>(be, N * D);
    a->final_rstd = backend::Buffer<T>(be, N);
    a->last_rows = backend::Buffer<T>(be, std::size_t(o.max_sequences) * D);
  }
  if (a->has_logits) a->logits = backend::Buffer<T>(be, std::size_t(o.max_sequences) * std::size_t(a->V));
  if (o.training) {
    a->out_grad = backend::Buffer<T>(be, N * D);
    a->d_res = backend::Buffer<T>(be, N * D);
    a->d_ln = backend::Buffer<T>(be, N * D);
    a->d_qkv = backend::Buffer<T>(be, N * std::size_t(a->QKV));
    a->d_att = backend::Buffer<T>(be, N * std::size_t(a->HD));
    a->d_gate_up = backend::Buffer<T>(be, N * 2 * std::size_t(a->I));
    a->d_act = backend::Buffer<T>(be, N * std::size_t(a->I));
    if (c.sandwich_norms) a->d_norm_out = backend::Buffer<T>(be, N * D);
    if (c.qk_norm && m.tp_split()) a->d_qk_norm = backend::Buffer<T>(be, 2 * std::size_t(c.head_dim()));
  }
  return BasicActivations<T>(std::move(a));
}

template <typename T>
BasicKVCache<T> BasicModel<T>::make_kv_cache(int slots, std::int64_t max_len) const {
  return make_kv_cache(KVCacheOptions{.slots = slots, .max_len = max_len, .dtype = backend::dtype_of<T>()});
}

template <typename T>
std::int64_t BasicModel<T>::kv_block_bytes(int block_size, backend::DType dtype) const {
  const Impl& m = *impl_;
  return 2 * std::int64_t(m.layers()) * block_size * std::int64_t(m.kv_heads) * m.cfg.head_dim() *
         std::int64_t(backend::dtype_size(dtype));
}

template <typename T>
BasicKVCache<T> BasicModel<T>::make_kv_cache(const KVCacheOptions& o) const {
  const Impl& m = *impl_;
  if (o.slots <= 0 || o.max_len <= 0) throw std::invalid_argument("make_kv_cache: slots and max_len must be positive");
  if (o.max_len > m.cfg.max_position_embeddings)
    throw std::invalid_argument("make_kv_cache: max_len exceeds max_position_embeddings");
  if (o.block_size <= 0) throw std::invalid_argument("make_kv_cache: block_size must be positive");
  if (o.blocks < 0) throw std::invalid_argument("make_kv_cache: negative block count");
  const backend::DType dtype = o.dtype == backend::DType::f32 ? backend::dtype_of<T>() : o.dtype;
  if (dtype != backend::dtype_of<T>() && dtype != backend::DType::bf16)
    throw std::invalid_argument(fmt::format("make_kv_cache: no {} cache for a {} model", backend::dtype_name(dtype),
                                            backend::dtype_name(backend::dtype_of<T>())));
  auto k = std::make_unique<typename BasicKVCache<T>::Impl>();
  k->be = m.be;
  k->layers = m.layers();
  k->slots = o.slots;
  k->max_len = o.max_len;
  k->block_size = o.block_size;
  k->max_blocks = int((o.max_len + o.block_size - 1) / o.block_size);
  k->blocks = o.blocks > 0 ? o.blocks : std::int64_t(o.slots) * k->max_blocks;
  if (k->blocks > std::numeric_limits<std::int32_t>::max() / o.block_size)
    throw std::invalid_argument("make_kv_cache: more cache rows than 32-bit slots can name");
  k->dtype = dtype;
  k->row = std::int64_t(m.kv_heads) * m.cfg.head_dim();   // this tp rank's key/value heads
  const std::size_t n = std::size_t(k->layers) * std::size_t(k->blocks) * std::size_t(o.block_size) *
                        std::size_t(k->row) * k->elem();
  k->k = backend::Buffer<std::byte>(*m.be, n);
  k->v = backend::Buffer<std::byte>(*m.be, n);
  k->tables = backend::Buffer<std::int32_t>(*m.be, std::size_t(o.slots) * std::size_t(k->max_blocks));
  k->host_tables.assign(std::size_t(o.slots) * std::size_t(k->max_blocks), -1);
  k->free_list.resize(std::size_t(k->blocks));
  // Block 0 on top of the stack: a fresh cache hands out blocks in order.
  for (std::int64_t b = 0; b < k->blocks; ++b) k->free_list[std::size_t(b)] = std::int32_t(k->blocks - 1 - b);
  k->held.assign(std::size_t(o.slots), 0);
  k->length.assign(std::size_t(o.slots), 0);
  return BasicKVCache<T>(std::move(k));
}

// ---- BasicActivations ----------------------------------------------------------

template <typename T> BasicActivations<T>::BasicActivations(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
template <typename T> BasicActivations<T>::~BasicActivations() = default;
template <typename T> BasicActivations<T>::BasicActivations(BasicActivations&&) noexcept = default;
template <typename T> BasicActivations<T>& BasicActivations<T>::operator=(BasicActivations&&) noexcept = default;

template <typename T> std::int64_t BasicActivations<T>::tokens() const { return impl_->n; }
template <typename T> int BasicActivations<T>::hidden_size() const { return impl_->D; }
template <typename T> T* BasicActivations<T>::input() { return impl_->resid.data(); }
template <typename T> const T* BasicActivations<T>::output() const { return impl_->output_ptr; }
template <typename T> T* BasicActivations<T>::output_grad() {
  if (!impl_->training) throw std::logic_error("output_grad: activations were made for inference");
  return impl_->out_grad.data();
}
template <typename T> const T* BasicActivations<T>::input_grad() const {
  if (!impl_->training) throw std::logic_error("input_grad: activations were made for inference");
  return impl_->d_res.data();
}
template <typename T> const T* BasicActivations<T>::logits() const { return impl_->logits.data(); }
template <typename T> T* BasicActivations<T>::logits() { return impl_->logits.data(); }

// ---- BasicKVCache --------------------------------------------------------------

template <typename T> BasicKVCache<T>::BasicKVCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
template <typename T> BasicKVCache<T>::~BasicKVCache() = default;
template <typename T> BasicKVCache<T>::BasicKVCache(BasicKVCache&&) noexcept = default;
template <typename T> BasicKVCache<T>& BasicKVCache<T>::operator=(BasicKVCache&&) noexcept = default;

template <typename T> int BasicKVCache<T>::slots() const { return impl_->slots; }
template <typename T> std::int64_t BasicKVCache<T>::max_len() const { return impl_->max_len; }
template <typename T> std::int64_t BasicKVCache<T>::length(int slot) const { return impl_->length.at(std::size_t(slot)); }
template <typename T> void BasicKVCache<T>::clear(int slot) {
  impl_->length.at(std::size_t(slot)) = 0;
  impl_->release_beyond(slot, 0);
}
template <typename T> void BasicKVCache<T>::truncate(int slot, std::int64_t len) {
  std::int64_t& l = impl_->length.at(std::size_t(slot));
  if (len < 0 || len > l) throw std::out_of_range("KVCache::truncate: length beyond the cached tokens");
  l = len;
  impl_->release_beyond(slot, len);
}
template <typename T> int BasicKVCache<T>::block_size() const { return impl_->block_size; }
template <typename T> std::int64_t BasicKVCache<T>::blocks() const { return impl_->blocks; }
template <typename T> std::int64_t BasicKVCache<T>::free_blocks() const { return std::int64_t(impl_->free_list.size()); }
template <typename T> std::int64_t BasicKVCache<T>::held_blocks(int slot) const { return impl_->held.at(std::size_t(slot)); }
template <typename T> std::int64_t BasicKVCache<T>::blocks_needed(int slot, std::int64_t tokens) const {
  return impl_->extra_blocks(slot, length(slot) + tokens);
}
template <typename T> backend::DType BasicKVCache<T>::dtype() const { return impl_->dtype; }
template <typename T> std::int64_t BasicKVCache<T>::bytes() const {
  return std::int64_t(impl_->k.size() + impl_->v.size());
}

template class BasicActivations<float>;
template class BasicActivations<double>;
template class BasicKVCache<float>;
template class BasicKVCache<double>;
template BasicActivations<float> BasicModel<float>::make_activations(const ActivationOptions&) const;
template BasicActivations<double> BasicModel<double>::make_activations(const ActivationOptions&) const;
template BasicKVCache<float> BasicModel<float>::make_kv_cache(int, std::int64_t) const;
template BasicKVCache<double> BasicModel<double>::make_kv_cache(int, std::int64_t) const;
template BasicKVCache<float> BasicModel<float>::make_kv_cache(const KVCacheOptions&) const;
template BasicKVCache<double> BasicModel<double>::make_kv_cache(const KVCacheOptions&) const;
template std::int64_t BasicModel<float>::kv_block_bytes(int, backend::DType) const;
template std::int64_t BasicModel<double>::kv_block_bytes(int, backend::DType) const;

}  // namespace braid::model
