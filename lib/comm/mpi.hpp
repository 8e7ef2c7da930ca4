// The Communicator over MPI (Open MPI on CPUs), and the process-wide MPI lifetime.
#pragma once

#include "dist/communicator.hpp"

#include <memory>

namespace braid::dist {

// MPI_Init_thread on construction unless MPI is already up (then it leaves MPI alone),
// MPI_Finalize on destruction if it initialised it. One per process, in main. Without
// mpirun the process is a world of one rank.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  bool owner_ = false;
};

// Every rank of the job, on a duplicate of MPI_COMM_WORLD (its messages never meet
// another library's). MPI must be initialised.
std::unique_ptr<Communicator> mpi_world();

}  // namespace braid::dist
