// braid-train's ranks under mpirun without --schedule: ranks = devices × tp
// (comm::Mesh, docs/parallel.md). The tp ranks of a device split every model N ways
// (--tp N, model/tensor_parallel.hpp) and run the same tokens; the devices are data
// parallel: each trains its part of every mini-batch (train/trainer.hpp), gradients
// summed and the optimizer state sharded (ZeRO stage 1, optim/adamw.hpp) over the cross
// group (the devices' ranks holding the same slices).
//
// Every rank reads the same inputs and checkpoints (a whole checkpoint, each rank its
// slices; or the tp files of this degree). Writing: each tp rank of device 0 writes its
// slice files of every checkpoint and optimizer state (checkpoint::tp_path; at tp 1 the
// checkpoint itself); world rank 0 leads: it alone writes --stats, lists the
// checkpoints on stdout and logs at the level asked (the others warn only).
// Run without mpirun it is a single process and starts no MPI.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "comm/mesh.hpp"
#include "comm/mpi.hpp"
#include "model/tensor_parallel.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::train {

class TrainingRanks {
 public:
  // MPI up (and the non-lead ranks' log level lowered) when launched by mpirun and
  // `enabled`; a single process otherwise. UsageError when tp does not divide the ranks,
  // or tp > 1 in a single process.
  explicit TrainingRanks(bool enabled = true, int tp = 1);
  ~TrainingRanks();
  TrainingRanks(const TrainingRanks&) = delete;
  TrainingRanks& operator=(const TrainingRanks&) = delete;

  // The data-parallel ranks (the cross group), nullptr with one device (what
  // TrainerOptions::data_parallel takes).
  comm::Communicator* comm() const { return mesh_.cross_group(); }
  // This rank's tensor-parallel slice and group (ModelOptions::tp; size 1: none).
  model::TensorParallel tp() const { return {mesh_.tp_size(), mesh_.tp_rank(), mesh_.tp_group()}; }
  const comm::Mesh& mesh() const { return mesh_; }
  int rank() const { return world_ ? world_->rank() : 0; }
  int size() const { return world_ ? world_->size() : 1; }
  // World rank 0: the stdout listing, --stats, the logs.
  bool lead() const { return rank() == 0; }
  // Device 0's ranks: each writes its tp slice of every checkpoint and optimizer state.
  bool writes_checkpoints() const { return mesh_.device() == 0; }
  // Whether `mine` holds on every rank (collective): a decision the ranks must share.
  bool all(bool mine) const;
  void barrier() const;
  // "one process", "data parallel over N ranks", "tp 2 x 3 devices (6 ranks): ...".
  std::string describe() const;
  // This rank's file of a checkpoint named `out` (tp_path), and every tp rank's.
  std::filesystem::path own_file(const std::filesystem::path& out) const;
  std::vector<std::filesystem::path> files(const std::filesystem::path& out) const;
  // UsageError unless each input can be read by every rank: "-" (stdin, which only one
  // rank of mpirun has) is refused with more than one rank.
  void require_named_inputs(const std::vector<std::string>& inputs, const std::string& what) const;
  // Several ranks on a backend whose memory the host cannot address (CUDA): the groups
  // are made again over comm::cuda_group, so that they take device buffers (gradients,
  // the ZeRO-1 all-gather, the tp all-reduces): over NCCL where every rank has a GPU of
  // its own, staged through host memory over MPI otherwise (BRAID_DEVICE_COMM forces
  // either; rank 0 logs which). Collective; call it before tp() or comm() is handed to a
  // model or trainer. Nothing to do for one process or host memory.
  void use_device(const backend::Backend& be);
  // require_tp_splits(checkpoint, this layout's tp).
  void require_splits(const std::string& checkpoint) const;

 private:
  std::optional<comm::MpiRuntime> mpi_;
  std::unique_ptr<comm::Communicator> world_;
  std::unique_ptr<comm::Communicator> device_world_;   // use_device: world_ taking device buffers
  comm::Mesh mesh_;   // after the worlds: goes first
};

// InputError naming the checkpoint's file when its model cannot be split tp ways
// (model::check_tensor_parallel), before any model is built.
void require_tp_splits(const std::string& checkpoint, int tp);

}  // namespace braid::train
