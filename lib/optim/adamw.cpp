#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace braid::optim {

AdamW::AdamW(backend::Backend& be, std::span<model::Tensor<float>> tensors, const AdamWConfig& cfg)
    : be_(&be), cfg_(cfg) {
  std::int64_t total = 0;
  for (model::Tensor<float>& t : tensors) {
    // Decay the matrices; norms (1-D gains) keep their scale, as in GPT-2/Llama recipes.
    groups_.push_back({t.data, t.grad, t.numel, total, t.shape.size() >= 2});
    total += t.numel;
  }
  m_ = backend::Buffer<float>(be, std::size_t(total));
  v_ = backend::Buffer<float>(be, std::size_t(total));
}

double AdamW::grad_sq_norm(double grad_scale) const {
  // One reduction over every gradient where they live; only the sum comes back.
  std::vector<std::span<const float>> grads;
  grads.reserve(groups_.size());
  for (const Group& g : groups_) grads.emplace_back(g.g, static_cast<std::size_t>(g.n));
  return be_->ops<float>().global_sum_squares(grads) * grad_scale * grad_scale;
}

double AdamW::step_with_norm(double lr, double grad_scale, double global_norm) {
  double clip = 1.0;
  if (cfg_.max_grad_norm > 0 && global_norm > cfg_.max_grad_norm) clip = cfg_.max_grad_norm / (global_norm + 1e-6);
  ++step_;
  backend::Ops<float>& ops = be_->ops<float>();
  for (const Group& g : groups_) {
    backend::AdamWStep s{float(lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps),
                         g.decay ? float(cfg_.weight_decay) : 0.0f, float(grad_scale * clip), step_};
    ops.adamw(g.n, g.w, g.g, m_.data() + g.offset, v_.data() + g.offset, s);
  }
  return clip;
}

double AdamW::step(double lr, double grad_scale) {
  const double norm = std::sqrt(grad_sq_norm(grad_scale));
  step_with_norm(lr, grad_scale, norm);
  return norm;
}

double LrSchedule::at(std::int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) return peak_lr * double(step + 1) / double(warmup_steps);
  if (kind == Kind::constant || total_steps <= warmup_steps) return peak_lr;
  const double progress = std::min(1.0, double(step - warmup_steps) / double(total_steps - warmup_steps));
  return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace braid::optim
