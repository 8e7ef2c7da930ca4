#include "train/commands.hpp"

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/objectives.hpp"
#include "train/optimizer_state.hpp"
#include "train/train_inputs.hpp"
#include "train/train_outputs.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

namespace braid::train {

namespace {

using Clock = std::chrono::steady_clock;

TrainerOptions trainer_options(const CommonTrainOptions& c, double lr, std::size_t group) {
  TrainerOptions t;
  t.adamw.max_grad_norm = c.max_grad_norm;
  t.adamw.weight_decay = c.weight_decay;
  t.lr = {.peak_lr = lr, .min_lr = lr, .warmup_steps = c.warmup_steps, .kind = optim::LrSchedule::Kind::constant};
  t.micro = {.max_tokens = c.micro_tokens, .max_sequences = 0, .group = group};
  return t;
}

LoopOptions loop_options(const CommonTrainOptions& c, std::size_t group) {
  return {.epochs = c.epochs, .mini_batch = c.mini_batch * group, .seed = c.seed, .group = group};
}

// A model opened from a checkpoint with its trainer, optimizer state loaded when present.
struct Trainee {
  OpenedModel opened;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<Trainer> trainer;
  std::string spec, out, call;
};

void attach(Trainee& t, std::unique_ptr<Objective> obj, const TrainerOptions& opt) {
  t.objective = std::move(obj);
  t.trainer = std::make_unique<Trainer>(*t.opened.model, *t.objective, opt);
  if (load_optimizer_state(t.trainer->optimizer(), *t.opened.model, t.spec)) {
    log::info("{}: optimizer state of {} loaded (step {})", t.call, optimizer_state_path(t.spec).string(),
              t.trainer->optimizer().steps_taken());
  } else {
    log::info("{}: no optimizer state at {}: AdamW starts from zero", t.call, optimizer_state_path(t.spec).string());
  }
}

std::vector<CallRecord> run_loop(const io::SampleBatch& batch, std::vector<Trainee*> trainees, const LoopOptions& loop) {
  std::vector<NamedTrainer> named;
  for (Trainee* t : trainees) named.push_back({t->call, t->trainer.get()});
  const auto total = static_cast<std::uint64_t>(steps_per_call(batch.size(), loop) * std::int64_t(named.size()));
  Progress progress("training", total, "step");
  auto records = train_epochs(batch, named, loop, [&](const std::string& call, const StepStats& s) {
    progress.advance(1);
    progress.set_status(fmt::format("{} loss {:.4g} |g| {:.3g}", call, s.loss, s.grad_norm));
    log::debug("{} step: loss {:.6g}, grad norm {:.4g}, {} tokens in {} micro-batches, {:.3f} s", call, s.loss,
               s.grad_norm, s.tokens, s.micro_batches, s.seconds);
  });
  progress.finish();
  for (const auto& r : records) {
    log::info("{}: {} steps, {} tokens in {:.2f} s ({:.0f} tokens/s), last loss {:.5g}", r.call, r.steps.size(), r.tokens,
              r.seconds, r.seconds > 0 ? double(r.tokens) / r.seconds : 0.0,
              r.steps.empty() ? 0.0 : r.steps.back().loss);
  }
  return records;
}

void save_all(const std::vector<Trainee*>& trainees, const std::string& created_by) {
  for (Trainee* t : trainees) {
    const auto files = save_checkpoint(*t->opened.model, t->trainer->optimizer(), t->out,
                                       {.step = t->opened.step + 1, .created_by = created_by,
                                        .config_json = t->opened.config_json});
    log::info("{}: wrote {} (step {}) and {}", t->call, files[0].string(), t->opened.step + 1, files[1].string());
    std::cout << files[0].string() << std::endl;
  }
}

void write_stats(const CommonTrainOptions& c, Clock::time_point t0, const io::SampleBatch& batch,
                 const std::vector<CallRecord>& records) {
  if (c.stats.empty()) return;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  write_text_file(c.stats, train_stats_json(wall, static_cast<std::int64_t>(batch.size()),
                                            static_cast<std::int64_t>(batch.token_count()), records)
                                   .dump(2) + "\n");
}

// A rerun after an interruption: every output already there, at the step it would get.
bool already_done(const std::vector<Trainee*>& trainees) {
  for (const Trainee* t : trainees) {
    if (!checkpoint_complete(t->out, t->opened.step + 1)) return false;
  }
  for (const Trainee* t : trainees) {
    log::info("{}: {} is already complete (step {}): skipped", t->call, t->out, t->opened.step + 1);
    std::cout << t->out << std::endl;
  }
  return true;
}

void check_common(const CommonTrainOptions& c) {
  if (c.micro_tokens < 1) throw UsageError("--micro-tokens must be at least 1");
  if (c.epochs < 1) throw UsageError("--epochs must be at least 1");
  if (c.stats == "-") throw UsageError("--stats cannot be stdout (stdout lists the checkpoints written)");
}

}  // namespace

std::vector<std::string> required_arrays(const RlCommand& c) {
  std::vector<std::string> required{"logprobs/actor", "advantages"};
  if (c.algorithm == "ppo") required.insert(required.end(), {"values", "returns"});
  if (c.algorithm == "grpo" && c.kl_coef != 0) required.push_back("logprobs/ref");
  return required;
}

int run_rl(const RlCommand& c) {
  const auto t0 = Clock::now();
  check_common(c.common);
  const bool ppo = c.algorithm == "ppo";
  if (!ppo && c.algorithm != "grpo") throw UsageError("the algorithm is ppo or grpo, not " + c.algorithm);
  if (ppo && (c.critic.empty() || c.critic_out.empty())) throw UsageError("ppo needs --critic and --critic-out");
  if (!c.schedule.empty()) {
    // The fused pipeline's command (train/pipeline*) takes --schedule; until it is wired in here, say so.
    throw UsageError("--schedule runs the fused actor+critic pipeline under mpirun, which this build's braid-train "
                     "does not have yet; leave it out for single-process training");
  }
  auto be = backend::make_cpu_backend(c.common.threads);

  Trainee actor{open_model(c.actor, *be, {}, true, false), nullptr, nullptr, c.actor, c.actor_out, "actor_train"};
  Trainee critic;
  std::vector<Trainee*> trainees{&actor};
  if (ppo) {
    critic = {open_model(c.critic, *be, {}, false, true), nullptr, nullptr, c.critic, c.critic_out, "critic_train"};
    trainees.push_back(&critic);
  }
  if (already_done(trainees)) return 0;

  const std::vector<std::string> required = required_arrays(c);
  const TrainingShards shards =
      read_training_shards(c.inputs, required, [&](const std::filesystem::path& p, const io::SampleBatch& b, std::size_t first) {
        check_sequences_fit(b, first, actor.opened.model->config(), p.string());
        if (ppo) check_sequences_fit(b, first, critic.opened.model->config(), p.string());
        log::debug("read {} ({} sequences so far)", p.string(), b.size());
      });
  log::info("{} sequences, {} tokens from {} shards (policy step {}; actor step {})", shards.batch.size(),
            shards.batch.token_count(), shards.files.size(), shards.policy_step, actor.opened.step);
  if (shards.policy_step != actor.opened.step) {
    log::warn("the samples come from policy step {}, the actor is at step {}", shards.policy_step, actor.opened.step);
  }

  attach(actor, std::make_unique<PolicyObjective>(ppo ? ppo_actor_options(c.clip, c.entropy_coef)
                                                      : grpo_actor_options(c.clip, c.kl_coef)),
         trainer_options(c.common, c.common.lr, 1));
  if (ppo) attach(critic, std::make_unique<ValueObjective>(c.value_clip), trainer_options(c.common, c.critic_lr, 1));
  const auto records = run_loop(shards.batch, trainees, loop_options(c.common, 1));
  save_all(trainees, c.common.created_by);
  write_stats(c.common, t0, shards.batch, records);
  return 0;
}

namespace {

int run_text(const TextCommand& c, bool sft) {
  const auto t0 = Clock::now();
  check_common(c.common);
  auto be = backend::make_cpu_backend(c.common.threads);
  Trainee t{open_model(c.model, *be, {}, sft, !sft), nullptr, nullptr, c.model, c.model_out,
            sft ? "actor_train" : "reward_train"};
  std::vector<Trainee*> trainees{&t};
  if (already_done(trainees)) return 0;
  const auto tok = tok::load_tokenizer(c.tokenizer);
  const auto& cfg = t.opened.model->config();
  if (tok->vocab_size() > cfg.vocab_size) {
    throw UsageError(fmt::format("the tokenizer ({}) has {} tokens, the model's vocabulary only {}", tok->describe(),
                                 tok->vocab_size(), cfg.vocab_size));
  }
  const io::SampleBatch batch = sft ? read_sft_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings)
                                    : read_preference_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings);
  log::info("{} {} from {}, {} tokens", sft ? batch.size() : batch.size() / 2, sft ? "examples" : "pairs", c.data,
            batch.token_count());
  const std::size_t group = sft ? 1 : 2;
  std::unique_ptr<Objective> obj;
  if (sft) obj = std::make_unique<SftObjective>();
  else obj = std::make_unique<PairwiseRewardObjective>();
  attach(t, std::move(obj), trainer_options(c.common, c.common.lr, group));
  const auto records = run_loop(batch, trainees, loop_options(c.common, group));
  save_all(trainees, c.common.created_by);
  write_stats(c.common, t0, batch, records);
  return 0;
}

}  // namespace

int run_sft(const TextCommand& c) { return run_text(c, true); }
int run_rm(const TextCommand& c) { return run_text(c, false); }

}  // namespace braid::train
