#include "train/trainer.hpp"

#include "checkpoint/adapters.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "train/lora_dropout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <stdexcept>

namespace braid::train {

namespace {

model::ActivationOptions activation_options(const TrainerOptions& opt) {
  const data::MicroBatchLimits& micro = opt.micro;
  return {.max_tokens = micro.max_tokens,
          .max_sequences = micro.max_sequences > 0 ? micro.max_sequences : micro.max_tokens,
          .training = true,
          .recompute = opt.recompute};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Trainer::Trainer(model::Model& m, Objective& obj, TrainerOptions opt)
    : m_(&m), obj_(&obj), opt_(opt),
      dp_(opt.data_parallel.comm != nullptr && opt.data_parallel.comm->size() > 1 ? opt.data_parallel.comm : nullptr),
      adamw_(m.backend(), checkpoint::trained_tensors(m), opt.adamw, opt.data_parallel, m.tensor_parallel()),
      acts_(m.make_activations(activation_options(opt))) {
  if (!m.is_first_stage() || !m.is_last_stage()) {
    throw UsageError("the single-process trainer needs a whole model (pipeline stages train under mpirun)");
  }
  if (obj.needs_lm_head() && !m.lm_head_weight()) throw UsageError("the objective needs a model with an LM head");
  if (obj.needs_value_head() && !m.options().value_head) throw UsageError("the objective needs a model with a value head");
}

std::span<const std::size_t> Trainer::local_indices(std::span<const std::size_t> indices) const {
  if (dp_ == nullptr) return indices;
  const std::size_t group = std::max<std::size_t>(opt_.micro.group, 1);
  if (indices.size() % group != 0) {
    throw UsageError(fmt::format("{} sequences do not split into groups of {}", indices.size(), group));
  }
  const std::size_t groups = indices.size() / group, r = std::size_t(dp_->rank()), n = std::size_t(dp_->size());
  const std::size_t lo = groups * r / n, hi = groups * (r + 1) / n;
  return indices.subspan(lo * group, (hi - lo) * group);
}

StepStats Trainer::step(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<io::SampleBatch> mbs;
  if (dp_ == nullptr) {
    mbs = data::micro_batches(batch, local_indices(indices), opt_.micro);
  } else {
    // Only this rank sees its part: a sequence too long for --micro-tokens fails here
    // alone, so every rank learns whether any failed before the first collective waits.
    std::exception_ptr failed;
    try {
      mbs = data::micro_batches(batch, local_indices(indices), opt_.micro);
    } catch (...) {
      failed = std::current_exception();
    }
    std::int64_t any = failed ? 1 : 0;
    dp_->all_reduce(std::span<std::int64_t>(&any, 1), comm::ReduceOp::max);
    if (failed) std::rethrow_exception(failed);
    if (any != 0) throw UsageError("another rank could not cut its part of the mini-batch (its message says why)");
  }
  StepStats s = step(mbs);
  s.seconds = seconds_since(t0);
  return s;
}

StepStats Trainer::step(std::span<const io::SampleBatch> mbs) {
  const auto t0 = std::chrono::steady_clock::now();
  StepStats s;
  if (mbs.empty() && dp_ == nullptr) return s;
  // The loss is a mean over the units of the whole mini-batch (train/objective.hpp): of
  // every rank's part when data parallel.
  double units = total_units(*obj_, mbs);
  if (dp_ != nullptr) dp_->all_reduce_sum(std::span<double>(&units, 1));
  const double scale = units > 0 ? 1.0 / units : 0.0;
  LossTotals totals;
  m_->zero_grad();
  try {
    for (const io::SampleBatch& mb : mbs) {
      const LoraDropout dropout(*m_, mb, opt_.seed, adamw_.steps_taken());
      m_->forward({mb.tokens, mb.offsets, dropout.draw()}, acts_);
      totals.add(obj_->loss_and_grad(*m_, acts_, mb, scale));
      m_->backward(acts_);
      s.tokens += static_cast<std::int64_t>(mb.token_count());
      s.sequences += static_cast<std::int64_t>(mb.size());
    }
  } catch (const std::exception& e) {
    // The other ranks (data or tensor parallel) wait in the step's collectives: only
    // ending the job frees them.
    comm::Communicator* peers = dp_ != nullptr ? dp_ : m_->tensor_parallel().group;
    if (peers == nullptr) throw;
    log::error("{}", e.what());
    const bool bad_input = dynamic_cast<const InputError*>(&e) || dynamic_cast<const UsageError*>(&e) ||
                           dynamic_cast<const std::invalid_argument*>(&e);
    peers->abort(bad_input ? 2 : 1);
  }
  s.micro_batches = static_cast<std::int64_t>(mbs.size());
  if (dp_ != nullptr) {
    totals = LossTotals::over_ranks(*dp_, totals);
    std::array<std::int64_t, 3> counts{s.tokens, s.sequences, s.micro_batches};
    dp_->all_reduce_sum(std::span<std::int64_t>(counts));
    s.tokens = counts[0];
    s.sequences = counts[1];
    s.micro_batches = counts[2];
  }
  const LossStats mean = totals.mean();
  s.loss = mean.loss;
  s.metrics = mean.metrics;
  s.lr = opt_.lr.at(adamw_.steps_taken());
  s.grad_norm = adamw_.step(s.lr, 1.0);  // the 1/units is already in the objective's scale
  s.seconds = seconds_since(t0);
  return s;
}

double Trainer::evaluate(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const auto mbs = data::micro_batches(batch, indices, opt_.micro);
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

void TrainerEngine::set_lr_steps_left(std::int64_t steps) {
  for (const NamedTrainer& t : trainers_) t.trainer->set_lr_total_steps(t.trainer->optimizer().steps_taken() + steps);
}

std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, std::span<const NamedTrainer> trainers,
                                     const LoopOptions& opt,
                                     const std::function<void(const std::string&, const StepStats&)>& on_step) {
  TrainerEngine engine({trainers.begin(), trainers.end()});
  return train_epochs(batch, engine, opt, on_step);
}

}  // namespace braid::train
