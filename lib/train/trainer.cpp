#include "train/trainer.hpp"

#include "core/error.hpp"
#include "core/rng.hpp"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

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
  StepStats s;
  if (mbs.empty()) return s;
  const double scale = 1.0 / static_cast<double>(mbs.size());
  m_->zero_grad();
  for (const io::SampleBatch& mb : mbs) {
    m_->forward({mb.tokens, mb.offsets}, acts_);
    const LossStats l = obj_->loss_and_grad(*m_, acts_, mb, scale);
    m_->backward(acts_);
    s.loss += scale * l.loss;
    for (const auto& [k, v] : l.metrics) s.metrics[k] += scale * v;
    s.tokens += static_cast<std::int64_t>(mb.token_count());
    s.sequences += static_cast<std::int64_t>(mb.size());
  }
  s.micro_batches = static_cast<std::int64_t>(mbs.size());
  s.lr = opt_.lr.at(adamw_.steps_taken());
  s.grad_norm = adamw_.step(s.lr, 1.0);  // the 1/k of accumulation is already in the objective's scale
  s.seconds = seconds_since(t0);
  return s;
}

double Trainer::evaluate(const io::SampleBatch& batch, std::span<const std::size_t> indices) {
  const auto mbs = micro_batches(batch, indices, opt_.micro);
  double loss = 0;
  for (const io::SampleBatch& mb : mbs) {
    m_->forward({mb.tokens, mb.offsets}, acts_);
    loss += obj_->loss_and_grad(*m_, acts_, mb, 1.0).loss / static_cast<double>(mbs.size());
  }
  m_->zero_grad();
  return loss;
}

std::int64_t steps_per_call(std::size_t sequences, const LoopOptions& opt) {
  const std::size_t groups = sequences / std::max<std::size_t>(opt.group, 1);
  const std::size_t per_step = opt.mini_batch == 0 ? groups : std::max<std::size_t>(opt.mini_batch / opt.group, 1);
  if (groups == 0) return 0;
  return static_cast<std::int64_t>(opt.epochs) * static_cast<std::int64_t>((groups + per_step - 1) / per_step);
}

std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, std::span<const NamedTrainer> trainers,
                                     const LoopOptions& opt,
                                     const std::function<void(const std::string&, const StepStats&)>& on_step) {
  const std::size_t group = std::max<std::size_t>(opt.group, 1);
  if (batch.size() % group != 0) {
    throw UsageError(fmt::format("{} sequences do not split into groups of {}", batch.size(), group));
  }
  if (opt.mini_batch != 0 && opt.mini_batch % group != 0) {
    throw UsageError(fmt::format("a mini-batch of {} sequences does not hold whole groups of {}", opt.mini_batch, group));
  }
  std::vector<CallRecord> records;
  for (const auto& t : trainers) records.push_back({t.call, {}, 0, 0});
  const std::size_t groups = batch.size() / group;
  const std::size_t per_step = opt.mini_batch == 0 ? groups : opt.mini_batch / group;
  std::vector<std::size_t> order(groups);
  std::vector<std::size_t> indices;
  for (int e = 0; e < opt.epochs; ++e) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(opt.seed, static_cast<std::uint64_t>(e));
    rng.shuffle(std::span<std::size_t>(order));
    for (std::size_t first = 0; first < groups; first += per_step) {
      indices.clear();
      for (std::size_t g = first; g < std::min(groups, first + per_step); ++g) {
        for (std::size_t k = 0; k < group; ++k) indices.push_back(order[g] * group + k);
      }
      for (std::size_t i = 0; i < trainers.size(); ++i) {
        const StepStats s = trainers[i].trainer->step(batch, indices);
        records[i].steps.push_back(s);
        records[i].seconds += s.seconds;
        records[i].tokens += s.tokens;
        if (on_step) on_step(trainers[i].call, s);
      }
    }
  }
  return records;
}

}  // namespace braid::train
