#include "generate/sampler.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace braid::gen {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) {
    throw UsageError(fmt::format("temperature must be >= 0 (0 is greedy), got {}", p.temperature));
  }
  if (p.top_k < 0) throw UsageError(fmt::format("top-k must be >= 0 (0 is off), got {}", p.top_k));
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) throw UsageError(fmt::format("top-p must be in (0, 1], got {}", p.top_p));
}

SequenceSampler::SequenceSampler(const SamplingParams& params, std::uint64_t sample_id, std::int64_t position)
    : params_(params), rng_(params.seed, sample_id) {
  validate(params);
  // One uniform per sampled token, none when greedy (sample() below).
  if (!params_.greedy()) {
    for (std::int64_t i = 0; i < position; ++i) rng_.uniform();
  }
}

double SequenceSampler::draw() { return params_.greedy() ? 0.0 : rng_.uniform(); }

Sampled SequenceSampler::sample(std::span<const float> logits) {
  Sampled x;
  backend::cpu::sample_row<float>(logits.data(), static_cast<std::int64_t>(logits.size()), params_.spec(), draw(),
                                  scratch_, &x.token, &x.logprob, &x.raw_logprob);
  return x;
}

RowSampler::RowSampler(backend::Backend& be, const SamplingParams& params, std::size_t max_rows)
    : be_(&be),
      spec_(params.spec()),
      max_rows_(max_rows),
      uniforms_(be, max_rows),
      tokens_(be, max_rows),
      logprobs_(be, max_rows),
      raw_logprobs_(be, max_rows) {
  validate(params);
}

void RowSampler::sample(const float* logits, std::int64_t vocab, std::span<SequenceSampler* const> samplers,
                        std::span<Sampled> out) {
  const std::size_t rows = samplers.size();
  if (out.size() != rows) {
    throw std::logic_error(fmt::format("RowSampler: {} rows for {} outputs", rows, out.size()));
  }
  if (rows == 0) return;
  upload_draws(samplers, rows);
  sample_on_device(logits, rows, vocab);
  download(out);
}

void RowSampler::upload_draws(std::span<SequenceSampler* const> samplers, std::size_t rows) {
  if (rows > max_rows_ || samplers.size() > rows) {
    throw std::logic_error(fmt::format("RowSampler: {} samplers on {} rows, room for {}", samplers.size(), rows, max_rows_));
  }
  host_uniforms_.assign(rows, 0.0);
  for (std::size_t i = 0; i < samplers.size(); ++i) host_uniforms_[i] = samplers[i]->draw();
  be_->copy_to_device_async(uniforms_.data(), host_uniforms_.data(), rows * sizeof(double), be_->current_stream());
}

void RowSampler::sample_on_device(const float* logits, std::size_t rows, std::int64_t vocab) {
  if (rows > max_rows_) throw std::logic_error(fmt::format("RowSampler: {} rows, room for {}", rows, max_rows_));
  be_->ops<float>().sample(logits, static_cast<std::int64_t>(rows), vocab, spec_, uniforms_.data(), tokens_.data(),
                           logprobs_.data(), raw_logprobs_.data());
}

void RowSampler::download(std::span<Sampled> out) {
  const std::size_t rows = out.size();
  if (rows > max_rows_) throw std::logic_error(fmt::format("RowSampler: {} rows, room for {}", rows, max_rows_));
  const backend::Stream stream = be_->current_stream();
  host_tokens_.resize(rows);
  host_logprobs_.resize(rows);
  host_raw_logprobs_.resize(rows);
  // Only a token and two logprobs per row cross to the host.
  be_->copy_to_host_async(host_tokens_.data(), tokens_.data(), rows * sizeof(std::int32_t), stream);
  be_->copy_to_host_async(host_logprobs_.data(), logprobs_.data(), rows * sizeof(float), stream);
  be_->copy_to_host_async(host_raw_logprobs_.data(), raw_logprobs_.data(), rows * sizeof(float), stream);
  be_->synchronize(stream);
  for (std::size_t i = 0; i < rows; ++i) out[i] = {host_tokens_[i], host_logprobs_[i], host_raw_logprobs_[i]};
}

}  // namespace braid::gen
