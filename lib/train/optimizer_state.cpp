#include "train/optimizer_state.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <array>
#include <exception>
#include <optional>

namespace braid::train {

namespace {

// The rank that writes and reads optimizer-state files under data parallelism.
constexpr int kStateRank = 0;

std::array<checkpoint::Moment, 2> moments_of(std::span<float> exp_avg, std::span<float> exp_avg_sq) {
  return {checkpoint::Moment{"exp_avg", exp_avg}, checkpoint::Moment{"exp_avg_sq", exp_avg_sq}};
}

// Whole-length moments in the optimizer's backend memory, on the one rank that reads or
// writes the file (the others hold their shards only).
struct WholeMoments {
  backend::Buffer<float> exp_avg, exp_avg_sq;
  WholeMoments(backend::Backend& be, std::int64_t n) : exp_avg(be, std::size_t(n)), exp_avg_sq(be, std::size_t(n)) {}
  std::span<float> first() { return {exp_avg.data(), exp_avg.size()}; }
  std::span<float> second() { return {exp_avg_sq.data(), exp_avg_sq.size()}; }
};

}  // namespace

void save_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& path,
                          const checkpoint::SaveInfo& info, bool write) {
  if (opt.dp_size() == 1) {
    if (write) checkpoint::save_optimizer_state(moments_of(opt.first_moment(), opt.second_moment()), opt.steps_taken(), m, path, info);
    return;
  }
  if (opt.dp_rank() != kStateRank) {
    opt.gather_state(kStateRank, {}, {});
    return;
  }
  WholeMoments whole(m.backend(), opt.parameter_count());
  opt.gather_state(kStateRank, whole.first(), whole.second());
  if (write) checkpoint::save_optimizer_state(moments_of(whole.first(), whole.second()), opt.steps_taken(), m, path, info);
}

bool load_optimizer_state(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& checkpoint) {
  if (opt.dp_size() == 1) {
    const auto step = checkpoint::load_optimizer_state(moments_of(opt.first_moment(), opt.second_moment()), m, checkpoint);
    if (step) opt.set_steps_taken(*step);
    return step.has_value();
  }
  // One rank reads the file and hands every rank its shard; a failure there is every
  // rank's (status -1), so no rank waits for shards that never come.
  comm::Communicator& comm = *opt.data_parallel();
  std::array<std::int64_t, 2> status{0, 0};   // {1 loaded, 0 none, -1 failed; step}
  std::optional<WholeMoments> whole;
  std::exception_ptr failure;
  if (opt.dp_rank() == kStateRank) {
    try {
      whole.emplace(m.backend(), opt.parameter_count());
      const auto step = checkpoint::load_optimizer_state(moments_of(whole->first(), whole->second()), m, checkpoint);
      status = {step ? 1 : 0, step.value_or(0)};
    } catch (...) {
      failure = std::current_exception();
      status = {-1, 0};
    }
  }
  comm.broadcast(std::span<std::int64_t>(status), kStateRank);
  if (status[0] < 0) {
    if (failure) std::rethrow_exception(failure);
    throw UsageError(fmt::format("{}: rank {} could not read its optimizer state (its message says why)",
                                 checkpoint.string(), kStateRank));
  }
  if (status[0] == 0) return false;
  if (whole) opt.scatter_state(kStateRank, whole->first(), whole->second());
  else opt.scatter_state(kStateRank, {}, {});
  opt.set_steps_taken(status[1]);
  return true;
}

}  // namespace braid::train
