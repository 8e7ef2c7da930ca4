// How a job's ranks are laid out when a model is split across tensor-parallel ranks:
// ranks = devices × tp, with tp the fastest index, so the ranks of one tensor-parallel
// group are adjacent (on one node, where Megatron-LM places them):
//
//   rank = device · tp + tp_rank        device: a data-parallel rank, or a device of a
//                                       fused pipeline's schedule (a stage of a replica)
//
// A Mesh is made once per run (collective over the world) and hands out the two groups
// every tool needs: the tensor-parallel group (the tp ranks of one device, which run the
// same tokens through their slices of the model) and the cross group (the ranks with
// this tp_rank, one per device: what data parallelism and pipeline point to point use,
// each tp rank talking to the same tp rank of another device). docs/parallel.md.
//
//   comm::Mesh mesh(*world, tp);            // UsageError unless tp divides the ranks
//   model_options.tp = {mesh.tp_size(), mesh.tp_rank(), mesh.tp_group()};
//   data_parallel_over(mesh.cross_group());   // nullptr when there is one device
#pragma once

#include "comm/communicator.hpp"

#include <memory>
#include <string>

namespace braid::comm {

class Mesh {
 public:
  // Collective over `world`: every rank passes the same tp. UsageError when tp < 1 or
  // tp does not divide world.size(). `world` must outlive the Mesh.
  Mesh(Communicator& world, int tp);
  // A single process: one device, tp 1, no groups.
  Mesh();
  ~Mesh();
  Mesh(Mesh&&) noexcept;
  Mesh& operator=(Mesh&&) noexcept;

  int ranks() const { return devices_ * tp_; }
  int tp_size() const { return tp_; }
  int tp_rank() const { return tp_rank_; }
  int devices() const { return devices_; }
  int device() const { return device_; }
  // The rank of (device, tp_rank) in the world.
  int rank_of(int device, int tp_rank) const { return device * tp_ + tp_rank; }

  Communicator* world() const { return world_; }          // nullptr for a single process
  Communicator* tp_group() const { return tp_group_.get(); }        // nullptr when tp is 1
  Communicator* cross_group() const { return cross_group_.get(); }  // nullptr with one device

  // "tp 2 × 3 devices (6 ranks)", or "one process".
  std::string describe() const;

 private:
  Communicator* world_ = nullptr;
  int tp_ = 1, tp_rank_ = 0, devices_ = 1, device_ = 0;
  std::unique_ptr<Communicator> tp_group_, cross_group_;
};

}  // namespace braid::comm
