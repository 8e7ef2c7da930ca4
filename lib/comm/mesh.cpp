#include "comm/mesh.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace braid::comm {

Mesh::Mesh() = default;
Mesh::~Mesh() = default;
Mesh::Mesh(Mesh&&) noexcept = default;
Mesh& Mesh::operator=(Mesh&&) noexcept = default;

Mesh::Mesh(Communicator& world, int tp) : world_(&world), tp_(tp) {
  const int n = world.size();
  if (tp < 1 || n % tp != 0) {
    throw UsageError(fmt::format("--tp {}: the {} rank{} of this job do not split into tensor-parallel groups of {} "
                                 "(ranks = devices x tp; start a multiple of {} ranks)",
                                 tp, n, n == 1 ? "" : "s", tp, tp));
  }
  devices_ = n / tp;
  device_ = world.rank() / tp;
  tp_rank_ = world.rank() % tp;
  // split is collective over the world: every rank takes part in both, and a group of
  // one rank is not kept.
  auto tp_group = world.split(device_, tp_rank_);
  auto cross_group = world.split(tp_rank_, device_);
  if (tp_ > 1) tp_group_ = std::move(tp_group);
  if (devices_ > 1) cross_group_ = std::move(cross_group);
}

std::string Mesh::describe() const {
  if (ranks() == 1) return "one process";
  return fmt::format("tp {} x {} device{} ({} ranks)", tp_, devices_, devices_ == 1 ? "" : "s", ranks());
}

}  // namespace braid::comm
