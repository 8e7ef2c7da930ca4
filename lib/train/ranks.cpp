#include "train/ranks.hpp"

#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "comm/device_group.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace braid::train {

TrainingRanks::TrainingRanks(bool enabled, int tp) {
  if (tp < 1) throw UsageError(fmt::format("--tp must be at least 1, not {}", tp));
  if (!enabled || !comm::launched_by_mpi()) {
    if (tp > 1) {
      throw UsageError(fmt::format("--tp {} splits the model over the ranks of mpirun, and this is one process: start "
                                   "it with mpirun -np N, N a multiple of {}",
                                   tp, tp));
    }
    return;
  }
  mpi_.emplace(nullptr, nullptr);
  world_ = comm::mpi_world();
  // One rank tells the story; the others only warn (and stay quiet under -q). Progress
  // follows the level, so it is drawn once too.
  if (!lead()) log::set_level(std::min(log::level(), log::Level::warn));
  mesh_ = comm::Mesh(*world_, tp);
}

TrainingRanks::~TrainingRanks() {
  mesh_ = comm::Mesh();   // the groups go before the worlds, and they before MPI
  device_world_.reset();
  world_.reset();
}

bool TrainingRanks::all(bool mine) const {
  if (size() == 1) return mine;
  std::int64_t v = mine ? 1 : 0;
  world_->all_reduce(std::span<std::int64_t>(&v, 1), comm::ReduceOp::min);
  return v == 1;
}

void TrainingRanks::barrier() const {
  if (world_) world_->barrier();
}

std::string TrainingRanks::describe() const {
  if (size() == 1) return "one process";
  if (mesh_.tp_size() == 1) return fmt::format("data parallel over {} ranks", size());
  if (mesh_.devices() == 1) return fmt::format("tensor parallel over {} ranks (tp {})", size(), mesh_.tp_size());
  return fmt::format("{}: data parallel over {} devices, each model split over tp {}", mesh_.describe(),
                     mesh_.devices(), mesh_.tp_size());
}

std::filesystem::path TrainingRanks::own_file(const std::filesystem::path& out) const {
  return checkpoint::tp_path(out, mesh_.tp_rank(), mesh_.tp_size());
}

std::vector<std::filesystem::path> TrainingRanks::files(const std::filesystem::path& out) const {
  std::vector<std::filesystem::path> v;
  for (int r = 0; r < mesh_.tp_size(); ++r) v.push_back(checkpoint::tp_path(out, r, mesh_.tp_size()));
  return v;
}

void TrainingRanks::require_named_inputs(const std::vector<std::string>& inputs, const std::string& what) const {
  if (size() <= 1) return;
  if (std::find(inputs.begin(), inputs.end(), "-") != inputs.end()) {
    throw UsageError(fmt::format("{}: name the {} as arguments, not - (under mpirun only one rank reads stdin)",
                                 describe(), what));
  }
}

void TrainingRanks::use_device(const backend::Backend& be) {
  if (size() <= 1 || be.host_accessible() || device_world_) return;
  const auto spec = backend::parse_device(be.name());
  if (!spec || spec->kind != backend::DeviceKind::cuda) {
    throw std::logic_error(fmt::format("{}: no way to move the {} backend's memory between ranks", describe(), be.name()));
  }
  const int tp = mesh_.tp_size();
  mesh_ = comm::Mesh();
  device_world_ = comm::cuda_group(*world_, spec->device);
  mesh_ = comm::Mesh(*device_world_, tp);
}

void TrainingRanks::require_splits(const std::string& checkpoint) const { require_tp_splits(checkpoint, mesh_.tp_size()); }

void require_tp_splits(const std::string& checkpoint, int tp) {
  if (tp == 1) return;
  const auto files = checkpoint::checkpoint_files(checkpoint);
  const model::ModelConfig cfg = checkpoint::config_of(io::WeightShardSet({files.front()}));
  try {
    model::check_tensor_parallel(cfg, tp);
  } catch (const std::invalid_argument& e) {
    throw InputError(files.front().string(), "model_config", fmt::format("{} (--tp {})", e.what(), tp));
  }
}

}  // namespace braid::train
