#include "core/error.hpp"
#include "core/log.hpp"
#include "train/pipeline.hpp"

#include <fmt/format.h>

namespace braid::train {

PipelineEngine::PipelineEngine(FusedPipeline& pipe, std::vector<std::string> calls, std::vector<optim::LrSchedule> lr,
                               std::int64_t micro_tokens)
    : pipe_(&pipe), calls_(std::move(calls)), lr_(std::move(lr)), micro_tokens_(micro_tokens) {
  if (calls_.size() != lr_.size()) {
    throw std::invalid_argument(fmt::format("PipelineEngine: {} calls, {} learning-rate schedules", calls_.size(), lr_.size()));
  }
}

void PipelineEngine::set_lr_steps_left(std::int64_t steps) {
  for (std::size_t i = 0; i < lr_.size(); ++i) {
    lr_[i].total_steps = pipe_->optimizer(static_cast<int>(i)).steps_taken() + steps;
  }
}

std::vector<StepStats> PipelineEngine::step(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const std::size_t n = calls_.size();
  std::vector<std::vector<io::SampleBatch>> mbs(n);
  std::vector<double> lr(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int count = pipe_->micro_batches(static_cast<int>(i));
    if (indices.size() < static_cast<std::size_t>(count)) {
      throw UsageError(fmt::format("a mini-batch of {} sequences cannot fill the schedule's {} micro-batches: "
                                   "raise --mini-batch or use a schedule with fewer micro-batches",
                                   indices.size(), count));
    }
    mbs[i] = data::split_micro_batches(batch, indices, count);
    for (const auto& mb : mbs[i]) {
      if (static_cast<std::int64_t>(mb.token_count()) > micro_tokens_) {
        throw UsageError(fmt::format("a micro-batch of {} tokens exceeds --micro-tokens {}: raise it, lower "
                                     "--mini-batch, or use a schedule with more micro-batches",
                                     mb.token_count(), micro_tokens_));
      }
    }
    lr[i] = lr_[i].at(pipe_->optimizer(static_cast<int>(i)).steps_taken());
  }
  const PipelineStepResult r = pipe_->step(mbs, lr);
  std::vector<StepStats> out;
  for (std::size_t i = 0; i < n; ++i) {
    const PipelineModelResult& m = r.models[i];
    out.push_back({.loss = m.stats.loss, .grad_norm = m.grad_norm, .lr = lr[i],
                   .sequences = static_cast<std::int64_t>(indices.size()), .tokens = m.tokens,
                   .micro_batches = static_cast<std::int64_t>(mbs[i].size()),
                   // Fused models share the step's wall time: each is credited with it.
                   .seconds = r.wall_seconds, .metrics = m.stats.metrics});
  }
  return out;
}

}  // namespace braid::train
