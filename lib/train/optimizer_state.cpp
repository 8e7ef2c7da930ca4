#include "train/optimizer_state.hpp"

#include <array>

namespace braid::train {

namespace {

std::array<checkpoint::Moment, 2> moments_of(optim::AdamW& opt) {
  return {checkpoint::Moment{"exp_avg", opt.first_moment()}, checkpoint::Moment{"exp_avg_sq", opt.second_moment()}};
}

}  // namespace

void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const checkpoint::SaveInfo& info) {
  checkpoint::save_optimizer_state(moments_of(opt), opt.steps_taken(), m, path, info);
}

bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint) {
  const auto step = checkpoint::load_optimizer_state(moments_of(opt), m, checkpoint);
  if (step) opt.set_steps_taken(*step);
  return step.has_value();
}

}  // namespace braid::train
