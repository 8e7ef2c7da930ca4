#include "train/objectives.hpp"

#include "rl/rm_loss.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace braid::train {

std::vector<float> response_row_weights(const io::SampleBatch& mb, Aggregation aggregation) {
  std::vector<float> w(mb.token_count(), 0.0f);
  std::size_t total = 0, sequences = 0;
  for (std::size_t i = 0; i < mb.size(); ++i) {
    // Token begin(i) has no producing row in its sequence (a response never starts there in practice).
    const std::size_t first = std::max(mb.response_begin(i), mb.begin(i) + 1);
    if (first < mb.end(i)) {
      total += mb.end(i) - first;
      ++sequences;
    }
  }
  for (std::size_t i = 0; i < mb.size(); ++i) {
    const std::size_t first = std::max(mb.response_begin(i), mb.begin(i) + 1);
    if (first >= mb.end(i)) continue;
    const double each = aggregation == Aggregation::token_mean
                            ? 1.0 / double(total)
                            : 1.0 / (double(sequences) * double(mb.end(i) - first));
    for (std::size_t t = first; t < mb.end(i); ++t) w[t - 1] = static_cast<float>(each);
  }
  return w;
}

std::vector<float> token_array_on_rows(const io::SampleBatch& mb, const std::vector<float>& per_token) {
  if (per_token.size() != mb.token_count()) {
    throw std::invalid_argument(fmt::format("a per-token array of {} entries for {} tokens", per_token.size(),
                                            mb.token_count()));
  }
  std::vector<float> rows(per_token.size(), 0.0f);
  for (std::size_t i = 0; i < mb.size(); ++i) {
    for (std::size_t t = mb.begin(i) + 1; t < mb.end(i); ++t) rows[t - 1] = per_token[t];
  }
  return rows;
}

template <typename T>
T* DeviceRows<T>::room(backend::Backend& be, std::size_t n) {
  if (buf_.size() < n) buf_ = backend::Buffer<T>(be, std::max<std::size_t>(n, 2 * buf_.size()));
  return buf_.data();
}

template <typename T>
T* DeviceRows<T>::upload(backend::Backend& be, const std::vector<T>& host) {
  T* p = room(be, host.size());
  be.copy_to_device(p, host.data(), host.size() * sizeof(T));
  return p;
}

template <typename T>
void DeviceRows<T>::download(backend::Backend& be, std::vector<T>& host, std::size_t n) const {
  host.resize(n);
  be.copy_to_host(host.data(), buf_.data(), n * sizeof(T));
}

template class DeviceRows<float>;
template class DeviceRows<std::int32_t>;

namespace {

const std::vector<float>& need(const std::optional<std::vector<float>>& arr, const char* name, const char* objective) {
  if (!arr) throw std::invalid_argument(fmt::format("{} needs /{} in the micro-batch", objective, name));
  return *arr;
}

void check_rows(const model::Model& m, const model::Activations& acts, const io::SampleBatch& mb, const char* objective) {
  if (!m.is_last_stage()) throw std::logic_error(fmt::format("{}: runs on the last pipeline stage", objective));
  if (acts.tokens() != static_cast<std::int64_t>(mb.token_count())) {
    throw std::logic_error(fmt::format("{}: the activations hold {} rows, the micro-batch {} tokens", objective,
                                       acts.tokens(), mb.token_count()));
  }
}

model::Batch batch_of(const io::SampleBatch& mb) { return {mb.tokens, mb.offsets}; }

std::unique_ptr<rl::ChunkedLmHead<float>> make_head(const model::Model& m, std::int64_t chunk_rows) {
  return std::make_unique<rl::ChunkedLmHead<float>>(m.backend(), m.config().vocab_size, m.config().hidden_size,
                                                    chunk_rows);
}

std::int64_t counted(const std::vector<float>& w) {
  std::int64_t n = 0;
  for (float x : w) n += x != 0;
  return n;
}

}  // namespace

PolicyObjectiveOptions ppo_actor_options(double clip, double entropy_coef) {
  PolicyObjectiveOptions o;
  o.loss.clip_low = o.loss.clip_high = clip;
  o.loss.entropy_coef = entropy_coef;
  return o;
}

PolicyObjectiveOptions grpo_actor_options(double clip, double kl_coef) {
  PolicyObjectiveOptions o;
  o.loss.clip_low = o.loss.clip_high = clip;
  o.loss.kl_coef = kl_coef;
  o.aggregation = Aggregation::sequence_mean;
  return o;
}

PolicyObjective::PolicyObjective(PolicyObjectiveOptions opt) : opt_(opt) {}

LossStats PolicyObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                         double scale) {
  constexpr const char* kName = "the policy objective";
  check_rows(m, acts, mb, kName);
  const auto old = token_array_on_rows(mb, need(mb.logprobs_actor, "logprobs/actor", kName));
  const auto adv = token_array_on_rows(mb, need(mb.advantages, "advantages", kName));
  std::vector<float> ref;
  if (opt_.loss.kl_coef != 0) ref = token_array_on_rows(mb, need(mb.logprobs_ref, "logprobs/ref", kName));
  const auto weight = response_row_weights(mb, opt_.aggregation);
  const std::size_t n = mb.token_count();

  backend::Backend& be = m.backend();
  if (!head_) head_ = make_head(m, opt_.head_chunk_rows);
  const std::int32_t* targets = targets_.upload(be, rl::next_token_targets(batch_of(mb)));
  rl::token_logprobs<float>(m, acts, *head_, targets, logprob_.room(be, n), entropy_.room(be, n));
  std::vector<float> logprob, entropy, d_logprob(n), d_entropy;
  logprob_.download(be, logprob, n);
  entropy_.download(be, entropy, n);
  const bool entropy_grad = opt_.loss.entropy_coef != 0;
  if (entropy_grad) d_entropy.resize(n);

  const rl::PolicyLossResult r =
      rl::policy_loss({logprob, old, adv, weight, entropy, ref}, opt_.loss, d_logprob, d_entropy, scale);
  const float* d_lp = d_logprob_.upload(be, d_logprob);
  const float* d_ent = entropy_grad ? d_entropy_.upload(be, d_entropy) : nullptr;
  rl::token_logprobs_backward<float>(m, acts, *head_, targets, d_lp, d_ent);

  LossStats s;
  s.loss = r.loss;
  s.weight = static_cast<double>(counted(weight));
  s.metrics = {{"policy_loss", r.policy_loss}, {"clip_fraction", r.clip_fraction}, {"approx_kl", r.approx_kl},
               {"entropy", r.entropy}, {"ratio_max", r.ratio_max}};
  if (opt_.loss.kl_coef != 0) s.metrics["kl_ref"] = r.kl_ref;
  return s;
}

LossStats ValueObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                        double scale) {
  constexpr const char* kName = "the value objective";
  check_rows(m, acts, mb, kName);
  const auto old = token_array_on_rows(mb, need(mb.values, "values", kName));
  const auto ret = token_array_on_rows(mb, need(mb.returns, "returns", kName));
  const auto weight = response_row_weights(mb, Aggregation::token_mean);
  const std::size_t n = mb.token_count();
  backend::Backend& be = m.backend();
  m.values(acts, values_.room(be, n));
  std::vector<float> values, d_values(n);
  values_.download(be, values, n);
  const rl::ValueLossResult r = rl::value_loss({values, old, ret, weight}, clip_, d_values, scale);
  m.values_backward(acts, d_values_.upload(be, d_values));
  LossStats s;
  s.loss = r.loss;
  s.weight = static_cast<double>(counted(weight));
  s.metrics = {{"value_clip_fraction", r.clip_fraction}, {"value_error", r.mean_error}};
  return s;
}

std::vector<float> last_token_values(const model::Model& m, const model::Activations& acts, const io::SampleBatch& mb) {
  const std::size_t n = mb.token_count();
  std::vector<float> all(n), out;
  backend::Buffer<float> dev(m.backend(), n);
  m.values(acts, dev.data());
  m.backend().copy_to_host(all.data(), dev.data(), n * sizeof(float));
  for (std::size_t i = 0; i < mb.size(); ++i) out.push_back(all[mb.end(i) - 1]);
  return out;
}

LossStats PairwiseRewardObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                                 double scale) {
  check_rows(m, acts, mb, "the reward-model objective");
  if (mb.size() % 2 != 0) {
    throw std::invalid_argument(fmt::format("the reward-model objective needs (chosen, rejected) pairs, got {} sequences",
                                            mb.size()));
  }
  const std::size_t n = mb.token_count();
  const std::size_t pairs = mb.size() / 2;
  backend::Backend& be = m.backend();
  m.values(acts, values_.room(be, n));
  std::vector<float> values;
  values_.download(be, values, n);
  std::vector<float> chosen(pairs), rejected(pairs), d_chosen(pairs), d_rejected(pairs);
  for (std::size_t p = 0; p < pairs; ++p) {
    chosen[p] = values[mb.end(2 * p) - 1];
    rejected[p] = values[mb.end(2 * p + 1) - 1];
  }
  const rl::PairwiseLossResult r = rl::pairwise_loss(chosen, rejected, d_chosen, d_rejected, scale);
  std::vector<float> d_values(n, 0.0f);
  for (std::size_t p = 0; p < pairs; ++p) {
    d_values[mb.end(2 * p) - 1] = d_chosen[p];
    d_values[mb.end(2 * p + 1) - 1] = d_rejected[p];
  }
  m.values_backward(acts, d_values_.upload(be, d_values));
  LossStats s;
  s.loss = r.loss;
  s.weight = static_cast<double>(pairs);
  s.metrics = {{"accuracy", r.accuracy}, {"margin", r.margin}};
  return s;
}

LossStats SftObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                      double scale) {
  check_rows(m, acts, mb, "the SFT objective");
  const auto weight = response_row_weights(mb, Aggregation::token_mean);
  const std::size_t n = mb.token_count();
  backend::Backend& be = m.backend();
  if (!head_) head_ = make_head(m, chunk_rows_);
  const std::int32_t* targets = targets_.upload(be, rl::next_token_targets(batch_of(mb)));
  rl::token_logprobs<float>(m, acts, *head_, targets, logprob_.room(be, n), nullptr);
  std::vector<float> logprob, d_logprob(n);
  logprob_.download(be, logprob, n);
  double loss = 0;
  for (std::size_t r = 0; r < n; ++r) {
    loss -= double(weight[r]) * logprob[r];
    d_logprob[r] = static_cast<float>(-scale * weight[r]);
  }
  rl::token_logprobs_backward<float>(m, acts, *head_, targets, d_logprob_.upload(be, d_logprob), nullptr);
  LossStats s;
  s.loss = loss;
  s.weight = static_cast<double>(counted(weight));
  return s;
}

}  // namespace braid::train
