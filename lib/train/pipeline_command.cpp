#include "train/pipeline_command.hpp"

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/rng.hpp"
#include "dist/mpi.hpp"
#include "train/micro_batches.hpp"
#include "train/objectives.hpp"
#include "train/optimizer_state.hpp"
#include "train/pipeline.hpp"
#include "train/train_inputs.hpp"
#include "train/train_outputs.hpp"
#include "train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <numeric>

namespace braid::train {
namespace {

using Clock = std::chrono::steady_clock;

// The mini-batches of train_epochs (trainer.cpp): epoch e shuffled by Rng(seed, e), then
// runs of mini_batch sequences (0: all).
std::vector<std::vector<std::size_t>> mini_batches(std::size_t sequences, const CommonTrainOptions& c) {
  std::vector<std::vector<std::size_t>> out;
  const std::size_t per_step = c.mini_batch == 0 ? sequences : c.mini_batch;
  std::vector<std::size_t> order(sequences);
  for (int e = 0; e < c.epochs; ++e) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(c.seed, static_cast<std::uint64_t>(e));
    rng.shuffle(std::span<std::size_t>(order));
    for (std::size_t first = 0; first < sequences; first += per_step) {
      out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(first),
                       order.begin() + static_cast<std::ptrdiff_t>(std::min(sequences, first + per_step)));
    }
  }
  return out;
}

}  // namespace

int run_fused_rl(const RlCommand& c) {
  const auto t0 = Clock::now();
  const bool ppo = c.algorithm == "ppo";
  if (!ppo && c.algorithm != "grpo") throw UsageError("the algorithm is ppo or grpo, not " + c.algorithm);
  if (std::find(c.inputs.begin(), c.inputs.end(), "-") != c.inputs.end()) {
    throw UsageError("--schedule: name the shards as arguments (under mpirun only one rank reads stdin)");
  }
  if (ppo && (c.critic.empty() || c.critic_out.empty())) throw UsageError("ppo needs --critic and --critic-out");
  if (c.common.stats == "-") throw UsageError("--stats cannot be stdout (stdout lists the checkpoints written)");

  dist::MpiRuntime mpi(nullptr, nullptr);
  auto world = dist::mpi_world();
  const bool lead = world->rank() == 0;
  // One rank tells the story; the others only warn (and stay quiet under -q). Progress
  // follows the level, so it is drawn once too.
  if (!lead) log::set_level(std::min(log::level(), log::Level::warn));
  auto be = backend::make_cpu_backend(c.common.threads);
  const auto schedule = sched::load_schedule(load_json_file(c.schedule), c.schedule);

  PolicyObjective policy(ppo ? ppo_actor_options(c.clip, c.entropy_coef) : grpo_actor_options(c.clip, c.kl_coef));
  ValueObjective value(c.value_clip);
  const optim::AdamWConfig adamw{.weight_decay = c.common.weight_decay, .max_grad_norm = c.common.max_grad_norm};
  std::vector<PipelineModel> models{{"actor", c.actor, &policy, adamw, c.common.dtype}};
  std::vector<std::string> specs{c.actor}, outs{c.actor_out}, calls{"actor_train"};
  std::vector<double> peak_lr{c.common.lr};
  if (ppo) {
    models.push_back({"critic", c.critic, &value, adamw, c.common.dtype});
    specs.push_back(c.critic);
    outs.push_back(c.critic_out);
    calls.push_back("critic_train");
    peak_lr.push_back(c.critic_lr);
  }
  FusedPipeline pipe(schedule, *world, *be, models,
                     {.schedule_origin = c.schedule, .max_tokens = c.common.micro_tokens,
                      .max_sequences = c.common.micro_tokens});
  const std::size_t n = models.size();

  bool done = true;
  for (std::size_t i = 0; i < n; ++i) done = done && checkpoint_complete(outs[i], pipe.checkpoint_step(static_cast<int>(i)) + 1);
  if (done) {
    if (lead) {
      for (std::size_t i = 0; i < n; ++i) {
        log::info("{} is already complete: skipped", outs[i]);
        for (const auto& f : stage_paths(outs[i], pipe.stages(static_cast<int>(i)))) std::cout << f.string() << std::endl;
      }
    }
    return 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const int m = static_cast<int>(i);
    if (load_optimizer_state(pipe.optimizer(m), pipe.stage(m), specs[i])) {
      log::info("{}: optimizer state loaded (step {})", calls[i], pipe.optimizer(m).steps_taken());
    }
  }

  const auto required = required_arrays(c);
  TrainingShards shards =
      read_training_shards(c.inputs, required, [&](const std::filesystem::path& p, const io::SampleBatch& b, std::size_t first) {
        for (std::size_t i = 0; i < n; ++i) check_sequences_fit(b, first, pipe.stage(static_cast<int>(i)).config(), p.string());
      });
  if (shards.policy_step != pipe.checkpoint_step(0)) {
    log::warn("the samples come from policy step {}, the actor is at step {}", shards.policy_step, pipe.checkpoint_step(0));
  }
  prepare_advantages(c, shards.batch);
  const io::SampleBatch& batch = shards.batch;
  log::info("{} sequences, {} tokens from {} shards; fused pipeline over {} ranks ({})", batch.size(),
            batch.token_count(), shards.files.size(), world->size(), c.schedule);

  const auto steps = mini_batches(batch.size(), c.common);
  std::vector<CallRecord> records;
  for (const auto& call : calls) records.push_back({call, {}, 0, 0});
  Progress progress("training", steps.size(), "step");
  std::vector<std::vector<io::SampleBatch>> mbs(n);
  std::vector<double> lr(n);
  for (const auto& indices : steps) {
    for (std::size_t i = 0; i < n; ++i) {
      const int count = pipe.micro_batches(static_cast<int>(i));
      if (indices.size() < static_cast<std::size_t>(count)) {
        throw UsageError(fmt::format("a mini-batch of {} sequences cannot fill the schedule's {} micro-batches: "
                                     "raise --mini-batch or use a schedule with fewer micro-batches",
                                     indices.size(), count));
      }
      mbs[i] = split_micro_batches(batch, indices, count);
      for (const auto& mb : mbs[i]) {
        if (static_cast<std::int64_t>(mb.token_count()) > c.common.micro_tokens) {
          throw UsageError(fmt::format("a micro-batch of {} tokens exceeds --micro-tokens {}: raise it, lower "
                                       "--mini-batch, or use a schedule with more micro-batches",
                                       mb.token_count(), c.common.micro_tokens));
        }
      }
      const optim::LrSchedule sched{.peak_lr = peak_lr[i], .min_lr = peak_lr[i], .warmup_steps = c.common.warmup_steps,
                                    .kind = optim::LrSchedule::Kind::constant};
      lr[i] = sched.at(pipe.optimizer(static_cast<int>(i)).steps_taken());
    }
    const PipelineStepResult r = pipe.step(mbs, lr);
    for (std::size_t i = 0; i < n; ++i) {
      const PipelineModelResult& m = r.models[i];
      StepStats s{.loss = m.stats.loss, .grad_norm = m.grad_norm, .lr = lr[i],
                  .sequences = static_cast<std::int64_t>(indices.size()), .tokens = m.tokens,
                  .micro_batches = static_cast<std::int64_t>(mbs[i].size()),
                  // Fused models share the step's wall time: each is credited with it.
                  .seconds = r.wall_seconds, .metrics = m.stats.metrics};
      records[i].steps.push_back(s);
      records[i].seconds += s.seconds;
      records[i].tokens += s.tokens;
    }
    progress.advance(1);
    progress.set_status(fmt::format("actor loss {:.4g} |g| {:.3g}", r.models[0].stats.loss, r.models[0].grad_norm));
  }
  progress.finish();

  // The optimizer state first, then the weights: a checkpoint whose weights exist has its state.
  for (std::size_t i = 0; i < n; ++i) {
    const int m = static_cast<int>(i);
    if (pipe.replica(m) != 0) continue;
    save_optimizer_state(pipe.optimizer(m), pipe.stage(m),
                         stage_path(optimizer_state_path(outs[i]), pipe.stage_index(m), pipe.stages(m)),
                         {.step = pipe.optimizer(m).steps_taken(), .created_by = c.common.created_by});
  }
  world->barrier();
  std::vector<std::filesystem::path> out_paths(outs.begin(), outs.end());
  const auto files = pipe.save(out_paths, c.common.created_by);
  if (lead) {
    for (const auto& f : files) std::cout << f.string() << std::endl;
    if (!c.common.stats.empty()) {
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      write_text_file(c.common.stats, train_stats_json(wall, static_cast<std::int64_t>(batch.size()),
                                                       static_cast<std::int64_t>(batch.token_count()), records)
                                          .dump(2) + "\n");
    }
  }
  return 0;
}

}  // namespace braid::train
