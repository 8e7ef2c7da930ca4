// braid-train ppo and grpo in one process: scored shards into the actor (and critic).
#include "train/commands.hpp"

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "train/command_steps.hpp"
#include "rl/gae.hpp"
#include "train/objectives.hpp"
#include "train/pipeline_command.hpp"
#include "train/train_inputs.hpp"

#include <memory>

namespace braid::train {

using namespace steps;

std::vector<std::string> required_arrays(const RlCommand& c) {
  std::vector<std::string> required{"logprobs/actor", "advantages"};
  if (c.algorithm == "ppo") required.insert(required.end(), {"values", "returns"});
  if (c.algorithm == "grpo" && c.kl_coef != 0) required.push_back("logprobs/ref");
  return required;
}

void prepare_advantages(const RlCommand& c, io::SampleBatch& b) {
  if (!c.normalize_advantages) return;
  const rl::Whitening w = rl::whiten_advantages(b);
  log::info("advantages normalised over {} response tokens (mean {:.4g}, std {:.4g})", w.tokens, w.mean, w.std);
}

int run_rl(const RlCommand& c) {
  const auto t0 = Clock::now();
  check_common(c.common);
  const bool ppo = c.algorithm == "ppo";
  if (!ppo && c.algorithm != "grpo") throw UsageError("the algorithm is ppo or grpo, not " + c.algorithm);
  if (ppo && (c.critic.empty() || c.critic_out.empty())) throw UsageError("ppo needs --critic and --critic-out");
  if (!c.schedule.empty()) return run_fused_rl(c);  // under mpirun (train/pipeline_command.hpp)
  auto be = backend::make_cpu_backend(c.common.threads);

  Trainee actor{open_model(c.actor, *be, {}, true, false, c.common.dtype), nullptr, nullptr, c.actor, c.actor_out, "actor_train"};
  Trainee critic;
  std::vector<Trainee*> trainees{&actor};
  if (ppo) {
    critic = {open_model(c.critic, *be, {}, false, true, c.common.dtype), nullptr, nullptr, c.critic, c.critic_out, "critic_train"};
    trainees.push_back(&critic);
  }
  if (already_done(trainees)) return 0;

  const std::vector<std::string> required = required_arrays(c);
  TrainingShards shards =
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

  prepare_advantages(c, shards.batch);
  attach(actor, std::make_unique<PolicyObjective>(ppo ? ppo_actor_options(c.clip, c.entropy_coef)
                                                      : grpo_actor_options(c.clip, c.kl_coef)),
         trainer_options(c.common, c.common.lr, 1));
  if (ppo) attach(critic, std::make_unique<ValueObjective>(c.value_clip), trainer_options(c.common, c.critic_lr, 1));
  const auto records = run_loop(shards.batch, trainees, loop_options(c.common, 1));
  save_all(trainees, c.common.created_by);
  write_stats(c.common, t0, shards.batch, records);
  return 0;
}

}  // namespace braid::train
