// braid-train's data-parallel ranks: under mpirun without --schedule, every rank of the
// job trains the same models on its part of each mini-batch (train/trainer.hpp, ZeRO
// stage 1 in optim/adamw.hpp). Every rank reads the same inputs and checkpoints; rank 0
// leads: it alone writes each output file (checkpoints, optimizer states, --stats),
// lists the checkpoints on stdout and logs at the level asked (the others warn only).
// Run without mpirun it is a single process and starts no MPI.
#pragma once

#include "backend/backend.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::train {

class DataParallelRanks {
 public:
  // MPI up (and the non-lead ranks' log level lowered) when launched by mpirun and
  // `enabled`; a single process otherwise.
  explicit DataParallelRanks(bool enabled = true);
  ~DataParallelRanks();
  DataParallelRanks(const DataParallelRanks&) = delete;
  DataParallelRanks& operator=(const DataParallelRanks&) = delete;

  // The ranks, nullptr for a single process (what TrainerOptions::data_parallel takes).
  comm::Communicator* comm() const { return world_ && world_->size() > 1 ? world_.get() : nullptr; }
  int rank() const { return world_ ? world_->rank() : 0; }
  int size() const { return world_ ? world_->size() : 1; }
  bool lead() const { return rank() == 0; }
  // Whether `mine` holds on every rank (collective): a decision the ranks must share.
  bool all(bool mine) const;
  // "one process" or "data parallel over N ranks".
  std::string describe() const;
  // UsageError unless each input can be read by every rank: "-" (stdin, which only one
  // rank of mpirun has) is refused under data parallelism.
  void require_named_inputs(const std::vector<std::string>& inputs, const std::string& what) const;
  // UsageError when data parallel on a backend whose memory the host cannot address: the
  // MPI communicator moves host memory (a device one, NCCL, is not built yet).
  void require_host_memory(const backend::Backend& be) const;

 private:
  std::optional<comm::MpiRuntime> mpi_;
  std::unique_ptr<comm::Communicator> world_;
};

}  // namespace braid::train
