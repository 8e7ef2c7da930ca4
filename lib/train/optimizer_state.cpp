#include "train/optimizer_state.hpp"

#include <array>

namespace braid::train {

namespace {

std::array<checkpoint::Moment, 2> moments_of(std::span<float> exp_avg, std::span<float> exp_avg_sq) {
  return {checkpoint::Moment{"exp_avg", exp_avg}, checkpoint::Moment{"exp_avg_sq", exp_avg_sq}};
}

// Whole-length moments in the optimizer's backend memory (for a sharded optimizer).
struct WholeMoments {
  backend::Buffer<float> exp_avg, exp_avg_sq;
  WholeMoments(backend::Backend& be, std::int64_t n) : exp_avg(be, std::size_t(n)), exp_avg_sq(be, std::size_t(n)) {}
  std::array<checkpoint::Moment, 2> moments() {
    return moments_of({exp_avg.data(), exp_avg.size()}, {exp_avg_sq.data(), exp_avg_sq.size()});
  }
};

}  // namespace

void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const checkpoint::SaveInfo& info, bool write) {
  if (opt.dp_size() == 1) {
    if (write) checkpoint::save_optimizer_state(moments_of(opt.first_moment(), opt.second_moment()), opt.steps_taken(), m, path, info);
    return;
  }
  WholeMoments whole(m.backend(), opt.parameter_count());
  opt.gather_state({whole.exp_avg.data(), whole.exp_avg.size()}, {whole.exp_avg_sq.data(), whole.exp_avg_sq.size()});
  if (write) checkpoint::save_optimizer_state(whole.moments(), opt.steps_taken(), m, path, info);
}

bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint) {
  if (opt.dp_size() == 1) {
    const auto step = checkpoint::load_optimizer_state(moments_of(opt.first_moment(), opt.second_moment()), m, checkpoint);
    if (step) opt.set_steps_taken(*step);
    return step.has_value();
  }
  WholeMoments whole(m.backend(), opt.parameter_count());
  const auto step = checkpoint::load_optimizer_state(whole.moments(), m, checkpoint);
  if (!step) return false;
  opt.scatter_state({whole.exp_avg.data(), whole.exp_avg.size()}, {whole.exp_avg_sq.data(), whole.exp_avg_sq.size()});
  opt.set_steps_taken(*step);
  return true;
}

}  // namespace braid::train
