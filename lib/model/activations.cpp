// The buffers of a micro-batch and of a KV cache, sized once and reused.
#include "model/model_impl.hpp"

#include <stdexcept>

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
  a->slots = o.training ? m.layers() : 1;
  a->D = c.hidden_size;
  // This tp rank's share of the heads and intermediate units (all of them at tp 1).
  a->QKV = int(m.qkv_rows());
  a->HD = m.heads * c.head_dim();
  a->H = m.heads;
  a->I = int(m.inter);
  a->V = c.vocab_size;
  a->has_logits = m.last() && bool(m.head);
  a->segs.reserve(std::size_t(o.max_sequences));

  const std::size_t N = std::size_t(o.max_tokens), S = std::size_t(a->slots);
  const std::size_t D = std::size_t(a->D);
  a->tokens = backend::Buffer<std::int32_t>(be, N);
  a->pos = backend::Buffer<std::int32_t>(be, N);
  a->resid = backend::Buffer<T>(be, (o.training ? 2 * S + 1 : 1) * N * D);
  a->ln1 = backend::Buffer<T>(be, S * N * D);
  a->rstd1 = backend::Buffer<T>(be, S * N);
  a->qkv = backend::Buffer<T>(be, S * N * std::size_t(a->QKV));
  a->att = backend::Buffer<T>(be, S * N * std::size_t(a->HD));
  a->lse = backend::Buffer<T>(be, S * N * std::size_t(a->H));
  a->ln2 = backend::Buffer<T>(be, S * N * D);
  a->rstd2 = backend::Buffer<T>(be, S * N);
  a->gate_up = backend::Buffer<T>(be, S * N * 2 * std::size_t(a->I));
  a->act = backend::Buffer<T>(be, S * N * std::size_t(a->I));
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
  }
  return BasicActivations<T>(std::move(a));
}

template <typename T>
BasicKVCache<T> BasicModel<T>::make_kv_cache(int slots, std::int64_t max_len) const {
  const Impl& m = *impl_;
  if (slots <= 0 || max_len <= 0) throw std::invalid_argument("make_kv_cache: slots and max_len must be positive");
  if (max_len > m.cfg.max_position_embeddings)
    throw std::invalid_argument("make_kv_cache: max_len exceeds max_position_embeddings");
  auto k = std::make_unique<typename BasicKVCache<T>::Impl>();
  k->layers = m.layers();
  k->slots = slots;
  k->max_len = max_len;
  k->row = std::int64_t(m.kv_heads) * m.cfg.head_dim();   // this tp rank's key/value heads
  const std::size_t n = std::size_t(k->layers) * std::size_t(slots) * std::size_t(max_len) * std::size_t(k->row);
  k->k = backend::Buffer<T>(*m.be, n);
  k->v = backend::Buffer<T>(*m.be, n);
  k->length.assign(std::size_t(slots), 0);
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
template <typename T> void BasicKVCache<T>::clear(int slot) { impl_->length.at(std::size_t(slot)) = 0; }
template <typename T> void BasicKVCache<T>::truncate(int slot, std::int64_t len) {
  std::int64_t& l = impl_->length.at(std::size_t(slot));
  if (len < 0 || len > l) throw std::out_of_range("KVCache::truncate: length beyond the cached tokens");
  l = len;
}

template class BasicActivations<float>;
template class BasicActivations<double>;
template class BasicKVCache<float>;
template class BasicKVCache<double>;
template BasicActivations<float> BasicModel<float>::make_activations(const ActivationOptions&) const;
template BasicActivations<double> BasicModel<double>::make_activations(const ActivationOptions&) const;
template BasicKVCache<float> BasicModel<float>::make_kv_cache(int, std::int64_t) const;
template BasicKVCache<double> BasicModel<double>::make_kv_cache(int, std::int64_t) const;

}  // namespace braid::model
