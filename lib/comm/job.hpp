// The job this process belongs to. Under an MPI launcher (mpirun, srun: launched_by_mpi())
// MPI starts here (MpiRuntime) and world() holds every rank of the job; without one no MPI
// starts at all and world() is a world of this process alone (solo()): a plain run needs
// no MPI start-up, which writes files of its own and can fail where the tool's work
// would not (a file-size limit, a read-only /tmp).
//
//   comm::Job job(&argc, &argv);
//   auto& world = job.world();          // rank(), size(), the collectives
#pragma once

#include "comm/communicator.hpp"

#include <memory>

namespace braid::comm {

class MpiRuntime;

class Job {
 public:
  Job(int* argc, char*** argv);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  Communicator& world() { return *world_; }
  // Whether MPI was started (the process was launched by an MPI launcher).
  bool under_mpi() const { return mpi_ != nullptr; }

 private:
  std::unique_ptr<MpiRuntime> mpi_;
  std::unique_ptr<Communicator> world_;
};

// A world of one rank: collectives are this rank's own values, split() and group() give
// another such world, abort() ends the process; a message to a peer is a logic error (there
// is none).
std::unique_ptr<Communicator> solo();

}  // namespace braid::comm
