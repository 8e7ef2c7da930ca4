#include "score/advantages.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace braid::score {

rl::SequenceLayout layout_of(const io::SampleBatch& b) { return {b.offsets, b.prompt_len}; }

rl::PpoAdvantageSummary ppo_advantages(io::SampleBatch& b, const rl::PpoAdvantageOptions& opt) {
  const auto need = [](bool present, const char* name) {
    if (!present) throw std::invalid_argument(fmt::format("PPO advantages need /{}, which the batch lacks", name));
  };
  need(b.logprobs_actor.has_value(), "logprobs/actor");
  need(b.reward.has_value(), "reward");
  if (opt.kl_coef != 0.0) need(b.logprobs_ref.has_value(), "logprobs/ref");

  std::vector<float> advantages(b.token_count()), returns(b.token_count());
  const rl::PpoAdvantageInputs in{.layout = layout_of(b),
                                  .logprobs_actor = *b.logprobs_actor,
                                  .logprobs_ref = b.logprobs_ref ? std::span<const float>(*b.logprobs_ref)
                                                                 : std::span<const float>{},
                                  .values = b.values ? std::span<const float>(*b.values) : std::span<const float>{},
                                  .rewards = *b.reward};
  const rl::PpoAdvantageSummary s = rl::ppo_advantages(in, opt, advantages, returns);
  b.advantages = std::move(advantages);
  b.returns = std::move(returns);
  return s;
}

void group_advantages(io::SampleBatch& b, const rl::GroupRewards& groups, const rl::GroupOptions& opt) {
  std::vector<float> advantages(b.token_count());
  rl::broadcast_group_advantages(layout_of(b), b.sample_id, groups, opt, advantages);
  b.returns = advantages;
  b.advantages = std::move(advantages);
}

}  // namespace braid::score
