#include "fused_setup.hpp"

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/rng.hpp"
#include "model/model.hpp"
#include "sched/baselines.hpp"
#include "sched/lower.hpp"
#include "sched/schedule.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace braid::test {

void write_actor_critic(const model::ModelConfig& cfg, const std::filesystem::path& dir, std::uint64_t seed) {
  auto be = backend::make_cpu_backend(1);
  model::Model actor(cfg, {.lm_head = true}, *be);
  actor.init_random(seed);
  checkpoint::save_weights(actor, dir / "actor.h5", {.step = 7});
  model::Model critic(cfg, {.lm_head = false, .value_head = true}, *be);
  critic.init_random(seed + 1);
  checkpoint::save_weights(critic, dir / "critic.h5", {.step = 3});
}

io::SampleBatch scored_samples(int sequences, int lo, int hi, int vocab, std::uint64_t seed) {
  Rng rng(seed, 0);
  io::SampleBatch b;
  b.logprobs_actor.emplace();
  b.advantages.emplace();
  b.values.emplace();
  b.returns.emplace();
  b.reward.emplace();
  auto between = [&](int a, int z) { return a + static_cast<int>(rng.below(static_cast<std::uint64_t>(z - a + 1))); };
  for (int s = 0; s < sequences; ++s) {
    const int prompt = between(lo, hi), response = between(lo, hi);
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < prompt + response; ++i) tokens.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab))));
    const std::size_t i = b.add(tokens, prompt, s);
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
      // A random model's logprobs are close to uniform ones, so PPO's ratios start near 1.
      (*b.logprobs_actor)[t] = static_cast<float>(-std::log(static_cast<double>(vocab)) + 0.05 * rng.normal());
      (*b.advantages)[t] = static_cast<float>(rng.normal());
      (*b.values)[t] = static_cast<float>(0.05 * rng.normal());
      (*b.returns)[t] = static_cast<float>(2 * rng.uniform() - 1);
    }
    (*b.reward)[i] = static_cast<float>(rng.uniform());
  }
  return b;
}

std::string schedspec_json(const FusedModels& m) {
  if (m.devices % m.actor_stages != 0 || m.devices % m.critic_stages != 0) {
    throw std::invalid_argument("stages must divide devices");
  }
  const int actor_k = m.devices / m.actor_stages, critic_k = m.devices / m.critic_stages;
  if (m.micro_batches % actor_k != 0 || m.micro_batches % critic_k != 0) {
    throw std::invalid_argument("replicas must divide the micro-batches");
  }
  return fmt::format(
      R"({{"format": "braid.schedspec", "version": 1, "devices": {},
  "models": [
    {{"name": "actor", "stages": {}, "replicas": {}, "micro_batches": {}, "fwd": {}, "bwd": {}, "act_mem": 1}},
    {{"name": "critic", "stages": {}, "replicas": {}, "micro_batches": {}, "fwd": {}, "bwd": {}, "act_mem": 1}}]}})",
      m.devices, m.actor_stages, actor_k, m.micro_batches / actor_k, m.fwd, m.bwd, m.critic_stages, critic_k,
      m.micro_batches / critic_k, m.fwd, m.bwd);
}

std::string fused_schedule_json(const FusedModels& m, const std::string& order) {
  const sched::Problem p = sched::build_problem(sched::parse_schedspec(schedspec_json(m), "test spec"));
  sched::Order o;
  if (order == "greedy") {
    auto g = sched::greedy(p);
    if (!g) throw std::runtime_error("greedy fusion found no schedule");
    o = *g;
  } else {
    o = sched::one_f_one_b(p);
  }
  const sched::Timing timing = sched::evaluate(p, o);
  if (!timing.valid) throw std::runtime_error("invalid order: " + timing.problem);
  const sched::Lowered lowered = sched::lower(p, o, timing);
  return sched::schedule_to_json(p, o, timing, lowered, sched::reference_summary(p)).dump(1);
}

sched::LoadedSchedule fused_schedule(const FusedModels& m, const std::string& order) {
  return sched::load_schedule(json::parse(fused_schedule_json(m, order)), "test schedule");
}

}  // namespace braid::test
