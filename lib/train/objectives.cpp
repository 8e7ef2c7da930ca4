#include "train/objectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace braid::train {

namespace {

// The rows of sequence i that produce response tokens: [first - 1, end - 1) for tokens
// [first, end). Token begin(i) has no producing row in its sequence.
std::size_t first_response_token(const io::SampleBatch& mb, std::size_t i) {
  return std::max(mb.response_begin(i), mb.begin(i) + 1);
}

std::size_t learnt_tokens(const io::SampleBatch& mb, std::size_t i) {
  std::size_t n = 0;
  for (std::size_t t = first_response_token(mb, i); t < mb.end(i); ++t) n += mb.learnt(i, t);
  return n;
}

}  // namespace

std::optional<Aggregation> aggregation_named(std::string_view name) {
  for (const Aggregation a : {Aggregation::token_mean, Aggregation::seq_mean_token_sum, Aggregation::seq_mean_token_mean}) {
    if (name == to_string(a)) return a;
  }
  return std::nullopt;
}

const char* to_string(Aggregation a) {
  switch (a) {
    case Aggregation::token_mean: return "token-mean";
    case Aggregation::seq_mean_token_sum: return "seq-mean-token-sum";
    case Aggregation::seq_mean_token_mean: return "seq-mean-token-mean";
  }
  return "?";
}

std::vector<float> response_row_weights(const io::SampleBatch& mb, Aggregation aggregation) {
  std::vector<float> w(mb.token_count(), 0.0f);
  for (std::size_t i = 0; i < mb.size(); ++i) {
    const std::size_t learnt = learnt_tokens(mb, i);
    if (learnt == 0) continue;
    const double each = aggregation == Aggregation::seq_mean_token_mean ? 1.0 / double(learnt) : 1.0;
    for (std::size_t t = first_response_token(mb, i); t < mb.end(i); ++t) {
      if (mb.learnt(i, t)) w[t - 1] = static_cast<float>(each);
    }
  }
  return w;
}

double response_units(const io::SampleBatch& mb, Aggregation aggregation) {
  double units = 0;
  for (std::size_t i = 0; i < mb.size(); ++i) {
    const std::size_t learnt = learnt_tokens(mb, i);
    if (learnt > 0) units += aggregation == Aggregation::token_mean ? double(learnt) : 1.0;
  }
  return units;
}

std::vector<float> sequence_log_ratios(const io::SampleBatch& mb, std::span<const float> logprob_rows,
                                       std::span<const float> old_rows) {
  if (logprob_rows.size() != mb.token_count() || old_rows.size() != mb.token_count()) {
    throw std::invalid_argument(fmt::format("sequence_log_ratios: {} and {} rows for {} tokens", logprob_rows.size(),
                                            old_rows.size(), mb.token_count()));
  }
  constexpr double kMaxLogRatio = 10.0;  // exp(10) ≈ 2.2e4: far outside any clip range, still finite
  std::vector<float> out(mb.token_count(), 0.0f);
  for (std::size_t i = 0; i < mb.size(); ++i) {
    const std::size_t first = first_response_token(mb, i);
    if (first >= mb.end(i)) continue;
    double sum = 0;
    for (std::size_t t = first; t < mb.end(i); ++t) sum += double(logprob_rows[t - 1]) - double(old_rows[t - 1]);
    const auto mean = static_cast<float>(std::min(kMaxLogRatio, sum / double(mb.end(i) - first)));
    for (std::size_t t = first; t < mb.end(i); ++t) out[t - 1] = mean;
  }
  return out;
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

template class DeviceRows<float>;
template class DeviceRows<std::int32_t>;
template class DeviceRows<std::int64_t>;

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

// The model's head: its vocabulary slice and tp group under tensor parallelism.
std::unique_ptr<rl::ChunkedLmHead<float>> make_head(const model::Model& m, std::int64_t chunk_rows) {
  return std::make_unique<rl::ChunkedLmHead<float>>(m, chunk_rows);
}

}  // namespace

PolicyObjectiveOptions ppo_actor_options(double clip, double entropy_coef) {
  PolicyObjectiveOptions o;
  o.loss.clip_low = o.loss.clip_high = clip;
  o.loss.entropy_coef = entropy_coef;
  return o;
}

PolicyObjectiveOptions grpo_actor_options(double clip, double kl_coef, double entropy_coef) {
  PolicyObjectiveOptions o = ppo_actor_options(clip, entropy_coef);
  o.loss.kl_coef = kl_coef;
  o.aggregation = Aggregation::seq_mean_token_mean;
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
  float* logprob = logprob_.room(be, n);
  float* entropy = entropy_.room(be, n);
  rl::token_logprobs<float>(m, acts, *head_, targets, logprob, entropy);
  const bool entropy_grad = opt_.loss.entropy_coef != 0;
  float* d_logprob = d_logprob_.room(be, n);
  float* d_entropy = entropy_grad ? d_entropy_.room(be, n) : nullptr;
  const float* log_ratio = nullptr;
  if (opt_.sequence_ratio) {
    // A sequence's ratio needs all its rows' logprobs: n floats to the host and back.
    std::vector<float> rows(n);
    be.copy_to_host(rows.data(), logprob, n * sizeof(float));
    log_ratio = log_ratio_.upload(be, sequence_log_ratios(mb, rows, old));
  }
  const backend::PolicyLossSums r = be.ops<float>().policy_loss(
      static_cast<std::int64_t>(n),
      {.logprob = logprob, .old_logprob = old_.upload(be, old), .advantages = adv_.upload(be, adv),
       .weight = weight_.upload(be, weight), .entropy = entropy,
       .ref_logprob = ref.empty() ? nullptr : ref_.upload(be, ref), .log_ratio = log_ratio},
      opt_.loss, scale, d_logprob, d_entropy);
  rl::token_logprobs_backward<float>(m, acts, *head_, targets, d_logprob, d_entropy);

  LossStats s;
  s.loss = r.loss;
  s.units = units(mb);
  // Metrics are means over the weighted rows (tokens, or under seq_mean_token_mean
  // sequences), whatever the loss's units.
  s.metric_units = r.weight;
  const double w = r.weight > 0 ? r.weight : 1.0;
  s.metrics = {{"policy_loss", r.policy_loss / w}, {"clip_fraction", r.clipped / w}, {"approx_kl", r.approx_kl / w},
               {"entropy", r.entropy / w}, {"ratio_max", r.ratio_max}};
  if (opt_.loss.kl_coef != 0) s.metrics["kl_ref"] = r.kl_ref / w;
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
  float* values = values_.room(be, n);
  m.values(acts, values);
  float* d_values = d_values_.room(be, n);
  const backend::ValueLossSums r = be.ops<float>().value_loss(
      static_cast<std::int64_t>(n),
      {.values = values, .old_values = old_.upload(be, old), .returns = returns_.upload(be, ret),
       .weight = weight_.upload(be, weight)},
      clip_, scale, d_values);
  m.values_backward(acts, d_values);
  LossStats s;
  s.loss = r.loss;
  s.units = r.weight;
  const double w = r.weight > 0 ? r.weight : 1.0;
  s.metrics = {{"value_clip_fraction", r.clipped / w}, {"value_error", r.error / w}};
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

namespace {

double pair_units(const io::SampleBatch& mb, const char* objective) {
  if (mb.size() % 2 != 0) {
    throw std::invalid_argument(fmt::format("{} needs (chosen, rejected) pairs, got {} sequences", objective, mb.size()));
  }
  return static_cast<double>(mb.size() / 2);
}

}  // namespace

double PairwiseRewardObjective::units(const io::SampleBatch& mb) const {
  return pair_units(mb, "the reward-model objective");
}

LossStats PairwiseRewardObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                                 double scale) {
  check_rows(m, acts, mb, "the reward-model objective");
  units(mb);  // refuses an odd count
  const std::size_t n = mb.token_count();
  const std::size_t pairs = mb.size() / 2;
  backend::Backend& be = m.backend();
  float* values = values_.room(be, n);
  m.values(acts, values);
  std::vector<std::int64_t> chosen(pairs), rejected(pairs);
  for (std::size_t p = 0; p < pairs; ++p) {
    chosen[p] = static_cast<std::int64_t>(mb.end(2 * p) - 1);
    rejected[p] = static_cast<std::int64_t>(mb.end(2 * p + 1) - 1);
  }
  float* d_values = d_values_.room(be, n);
  be.fill_zero(d_values, n * sizeof(float));
  const backend::PairwiseLossSums r = be.ops<float>().pairwise_loss(
      static_cast<std::int64_t>(pairs), values, chosen_.upload(be, chosen), rejected_.upload(be, rejected), scale,
      d_values);
  m.values_backward(acts, d_values);
  LossStats s;
  s.loss = r.loss;
  s.units = static_cast<double>(pairs);
  const double count = pairs > 0 ? double(pairs) : 1.0;
  s.metrics = {{"accuracy", r.correct / count}, {"margin", r.margin / count}};
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
  float* logprob = logprob_.room(be, n);
  rl::token_logprobs<float>(m, acts, *head_, targets, logprob, nullptr);
  float* d_logprob = d_logprob_.room(be, n);
  const double loss =
      be.ops<float>().nll_loss(static_cast<std::int64_t>(n), logprob, weight_.upload(be, weight), scale, d_logprob);
  rl::token_logprobs_backward<float>(m, acts, *head_, targets, d_logprob, nullptr);
  LossStats s;
  s.loss = loss;
  s.units = units(mb);
  return s;
}

double DpoObjective::units(const io::SampleBatch& mb) const { return pair_units(mb, "the DPO objective"); }

LossStats DpoObjective::loss_and_grad(model::Model& m, model::Activations& acts, const io::SampleBatch& mb,
                                      double scale) {
  constexpr const char* kName = "the DPO objective";
  check_rows(m, acts, mb, kName);
  const double pairs = units(mb);  // refuses an odd count
  const auto ref = token_array_on_rows(mb, need(mb.logprobs_ref, "logprobs/ref", kName));
  const auto weight =
      response_row_weights(mb, opt_.length_normalize ? Aggregation::seq_mean_token_mean : Aggregation::token_mean);
  const std::size_t n = mb.token_count();
  backend::Backend& be = m.backend();
  if (!head_) head_ = make_head(m, opt_.head_chunk_rows);
  const std::int32_t* targets = targets_.upload(be, rl::next_token_targets(batch_of(mb)));
  float* logprob = logprob_.room(be, n);
  rl::token_logprobs<float>(m, acts, *head_, targets, logprob, nullptr);
  float* d_logprob = d_logprob_.room(be, n);
  const backend::DpoLossSums r = be.ops<float>().dpo_loss(
      static_cast<std::int64_t>(pairs),
      {.logprob = logprob, .ref_logprob = ref_.upload(be, ref), .weight = weight_.upload(be, weight),
       .sequence_rows = sequence_rows_.upload(be, mb.offsets)},
      opt_.loss, scale, d_logprob);
  rl::token_logprobs_backward<float>(m, acts, *head_, targets, d_logprob, nullptr);
  LossStats s;
  s.loss = r.loss;
  s.units = pairs;
  const double count = pairs > 0 ? pairs : 1.0;
  s.metrics = {{"accuracy", r.correct / count},
               {"margin", r.margin / count},
               {"reward_chosen", r.reward_chosen / count},
               {"reward_rejected", r.reward_rejected / count},
               {"logp_chosen", r.logp_chosen / count},
               {"logp_rejected", r.logp_rejected / count},
               {"logp_accuracy", r.logp_correct / count}};
  return s;
}

}  // namespace braid::train
