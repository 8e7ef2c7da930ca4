#include "rl/sft_loss.hpp"

#include <stdexcept>

namespace braid::rl {

double sft_loss(std::span<const float> logprob, std::span<const std::int32_t> targets,
                std::span<const std::uint8_t> loss_mask, std::span<float> d_logprob, double scale) {
  if (targets.size() != logprob.size() || d_logprob.size() != logprob.size() ||
      (!loss_mask.empty() && loss_mask.size() != logprob.size()))
    throw std::invalid_argument("sft_loss: logprob, targets, loss_mask and d_logprob differ in length");
  auto counts = [&](std::size_t i) { return targets[i] >= 0 && (loss_mask.empty() || loss_mask[i] != 0); };
  std::size_t n = 0;
  double sum = 0;
  for (std::size_t i = 0; i < logprob.size(); ++i)
    if (counts(i)) { ++n; sum += logprob[i]; }
  for (std::size_t i = 0; i < logprob.size(); ++i)
    d_logprob[i] = counts(i) ? float(-scale / double(n)) : 0.0f;
  return n == 0 ? 0.0 : -sum / double(n);
}

}  // namespace braid::rl
