// A sample batch's advantages: rl's span functions (rl/gae.hpp, rl/grpo.hpp) applied
// to the arrays of an io::SampleBatch, which rl does not know.
#pragma once

#include "io/sample_batch.hpp"
#include "rl/gae.hpp"
#include "rl/grpo.hpp"
#include "rl/sequence_layout.hpp"

namespace braid::score {

// The batch's offsets and prompt lengths as rl sees them (valid while b is unchanged).
rl::SequenceLayout layout_of(const io::SampleBatch& b);

// Fills b.advantages and b.returns (prompt positions 0) from b.logprobs_actor,
// b.logprobs_ref (needed when kl_coef != 0), b.values (absent: V = 0, the returns-to-go
// with λ = 1) and b.reward. std::invalid_argument naming the missing array.
rl::PpoAdvantageSummary ppo_advantages(io::SampleBatch& b, const rl::PpoAdvantageOptions& opt);

// Fills b.advantages and b.returns (equal; prompt positions 0) from the table, which must
// hold every group of the batch complete (std::logic_error naming the group otherwise).
void group_advantages(io::SampleBatch& b, const rl::GroupRewards& groups, const rl::GroupOptions& opt);

}  // namespace braid::score
