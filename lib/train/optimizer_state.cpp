#include "train/optimizer_state.hpp"

#include "core/error.hpp"
#include "io/fingerprint.hpp"

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
  return load_optimizer_state_file(opt, m, checkpoint::optimizer_state_path(checkpoint));
}

bool load_optimizer_state_file(optim::AdamW& opt, const model::Model& m, const std::filesystem::path& state) {
  if (opt.dp_size() == 1) {
    const auto step = checkpoint::load_optimizer_state_file(moments_of(opt.first_moment(), opt.second_moment()), m, state);
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
      const auto step = checkpoint::load_optimizer_state_file(moments_of(whole->first(), whole->second()), m, state);
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
                                 state.string(), kStateRank));
  }
  if (status[0] == 0) return false;
  if (whole) opt.scatter_state(kStateRank, whole->first(), whole->second());
  else opt.scatter_state(kStateRank, {}, {});
  opt.set_steps_taken(status[1]);
  return true;
}

StateSource optimizer_state_source(const std::string& option, const std::string& mode,
                                   const std::filesystem::path& checkpoint, const model::LoraOptions& fresh_adapters) {
  if (option == "fresh") return {std::nullopt, "--optimizer-state fresh: AdamW starts from zero"};
  if (option != "auto") {
    const std::filesystem::path given(option);
    const auto files = checkpoint::checkpoint_files(given);   // InputError naming it when there is none
    if (io::WeightShardReader(files.front()).meta().kind == "optimizer") {
      return {given, fmt::format("--optimizer-state {}", option)};
    }
    const auto beside = checkpoint::optimizer_state_path(given);
    if (!checkpoint::checkpoint_exists(beside)) {
      throw InputError(option, "--optimizer-state",
                       fmt::format("is a checkpoint with no optimizer state beside it ({} is not there)", beside.string()));
    }
    return {beside, fmt::format("--optimizer-state {}: the state beside it", option)};
  }
  if (fresh_adapters.enabled()) {
    return {std::nullopt, fmt::format("fresh LoRA adapters ({}): AdamW starts from zero", model::describe(fresh_adapters))};
  }
  const auto beside = checkpoint::optimizer_state_path(checkpoint);
  if (!checkpoint::checkpoint_exists(beside)) return {std::nullopt, fmt::format("no optimizer state at {}: AdamW starts from zero", beside.string())};
  const auto record = io::parse_made_from(checkpoint::made_from_of(checkpoint), checkpoint.string());
  const std::string tool = record ? record->value("tool", "") : "";
  if (tool == "braid-train " + mode) {
    return {beside, fmt::format("the state beside it, {} (braid-train {} made {}: the same stage goes on)",
                                beside.string(), mode, checkpoint.string())};
  }
  return {std::nullopt,
          fmt::format("{} was made by {}, not braid-train {}: a new stage, so AdamW starts from zero and {} is not "
                      "loaded (--optimizer-state {} loads it)",
                      checkpoint.string(), tool.empty() ? "a tool that recorded nothing of it" : tool, mode,
                      beside.string(), beside.string())};
}

}  // namespace braid::train
