#include "train/data_parallel.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace braid::train {

DataParallelRanks::DataParallelRanks(bool enabled) {
  if (!enabled || !comm::launched_by_mpi()) return;
  mpi_.emplace(nullptr, nullptr);
  world_ = comm::mpi_world();
  // One rank tells the story; the others only warn (and stay quiet under -q). Progress
  // follows the level, so it is drawn once too.
  if (!lead()) log::set_level(std::min(log::level(), log::Level::warn));
}

DataParallelRanks::~DataParallelRanks() {
  world_.reset();   // the communicator goes before MPI does
}

bool DataParallelRanks::all(bool mine) const {
  if (comm() == nullptr) return mine;
  std::int64_t v = mine ? 1 : 0;
  world_->all_reduce(std::span<std::int64_t>(&v, 1), comm::ReduceOp::min);
  return v == 1;
}

std::string DataParallelRanks::describe() const {
  return size() > 1 ? fmt::format("data parallel over {} ranks", size()) : std::string("one process");
}

void DataParallelRanks::require_named_inputs(const std::vector<std::string>& inputs, const std::string& what) const {
  if (size() <= 1) return;
  if (std::find(inputs.begin(), inputs.end(), "-") != inputs.end()) {
    throw UsageError(fmt::format("data parallel over {} ranks: name the {} as arguments, not - (under mpirun only "
                                 "one rank reads stdin)",
                                 size(), what));
  }
}

void DataParallelRanks::require_host_memory(const backend::Backend& be) const {
  if (size() <= 1 || be.host_accessible()) return;
  throw UsageError(fmt::format("data parallel over {} ranks: the {} backend's memory is not the host's, and the MPI "
                               "communicator moves host memory (use --device cpu; device buffers need NCCL, not built "
                               "yet)",
                               size(), be.name()));
}

}  // namespace braid::train
