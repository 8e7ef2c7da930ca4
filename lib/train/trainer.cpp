#include "train/trainer.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <chrono>

namespace braid::train {

namespace {

model::ActivationOptions activation_options(const MicroBatchLimits& micro) {
  return {.max_tokens = micro.max_tokens,
          .max_sequences = micro.max_sequences > 0 ? micro.max_sequences : micro.max_tokens,
          .training = true};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Trainer::Trainer(model::Model& m, Objective& obj, TrainerOptions opt)
    : m_(&m), obj_(&obj), opt_(opt), adamw_(m.backend(), m.tensors(), opt.adamw),
      acts_(m.make_activations(activation_options(opt.micro))) {
  if (!m.is_first_stage() || !m.is_last_stage()) {
    throw UsageError("the single-process trainer needs a whole model (pipeline stages train under mpirun)");
  }
  if (obj.needs_lm_head() && !m.lm_head_weight()) throw UsageError("the objective needs a model with an LM head");
  if (obj.needs_value_head() && !m.options().value_head) throw UsageError("the objective needs a model with a value head");
}

StepStats Trainer::step(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto mbs = micro_batches(batch, indices, opt_.micro);
  StepStats s = step(mbs);
  s.seconds = seconds_since(t0);
  return s;
}

StepStats Trainer::step(std::span<const io::SampleBatch> mbs) {
  const auto t0 = std::chrono::steady_clock::now();
  StepStats s;
  if (mbs.empty()) return s;
  // The loss is a mean over the units of the whole mini-batch (train/objective.hpp).
  const double units = total_units(*obj_, mbs);
  const double scale = units > 0 ? 1.0 / units : 0.0;
  LossTotals totals;
  m_->zero_grad();
  for (const io::SampleBatch& mb : mbs) {
    m_->forward({mb.tokens, mb.offsets}, acts_);
    totals.add(obj_->loss_and_grad(*m_, acts_, mb, scale));
    m_->backward(acts_);
    s.tokens += static_cast<std::int64_t>(mb.token_count());
    s.sequences += static_cast<std::int64_t>(mb.size());
  }
  const LossStats mean = totals.mean();
  s.loss = mean.loss;
  s.metrics = mean.metrics;
  s.micro_batches = static_cast<std::int64_t>(mbs.size());
  s.lr = opt_.lr.at(adamw_.steps_taken());
  s.grad_norm = adamw_.step(s.lr, 1.0);  // the 1/units is already in the objective's scale
  s.seconds = seconds_since(t0);
  return s;
}

double Trainer::evaluate(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const auto mbs = micro_batches(batch, indices, opt_.micro);
  LossTotals totals;
  for (const io::SampleBatch& mb : mbs) {
    m_->forward({mb.tokens, mb.offsets}, acts_);
    totals.add(obj_->loss_and_grad(*m_, acts_, mb, 1.0));
  }
  m_->zero_grad();
  return totals.mean().loss;
}

std::vector<std::string> TrainerEngine::calls() const {
  std::vector<std::string> out;
  for (const NamedTrainer& t : trainers_) out.push_back(t.call);
  return out;
}

std::vector<StepStats> TrainerEngine::step(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  std::vector<StepStats> out;
  for (const NamedTrainer& t : trainers_) out.push_back(t.trainer->step(batch, indices));
  return out;
}

std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, std::span<const NamedTrainer> trainers,
                                     const LoopOptions& opt,
                                     const std::function<void(const std::string&, const StepStats&)>& on_step) {
  TrainerEngine engine({trainers.begin(), trainers.end()});
  return train_epochs(batch, engine, opt, on_step);
}

}  // namespace braid::train
