// The Communicator over MPI (Open MPI on CPUs), the process-wide MPI lifetime, and the
// few things a tool asks of MPI outside a group. The only header of braid that stands
// for <mpi.h>, and it does not include it: no caller sees an MPI type.
#pragma once

#include "comm/communicator.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace braid::comm {

// Every wait of this communicator (a blocking call, Request::wait, a collective) polls
// its operation; one that makes no progress for BRAID_COMM_TIMEOUT seconds (default
// kDefaultTimeoutSeconds; 0 waits forever) prints which rank waited for what, with which
// peer (world ranks), and ends the whole job with kTimeoutExitCode. A value that is not
// a number >= 0 is refused (UsageError: exit 2) when MPI starts or a communicator is made.
// A sleeping wait (comm::wait_asleep: a rank done with its part, waiting for peers still
// at work) has BRAID_COMM_TIMEOUT's deadline when it is set, kDefaultIdleTimeoutSeconds
// when it is not. The calls of MPI that block without a request (MPI_Init, creating and
// splitting communicators, MPI_Finalize) are watched by a thread that ends the process
// after the same time (a peer stopped before MPI_Init leaves the others inside it).
inline constexpr double kDefaultTimeoutSeconds = 300;
inline constexpr double kDefaultIdleTimeoutSeconds = 3600;
inline constexpr int kTimeoutExitCode = 1;

// For a rank that polls requests itself (test() in a loop, between work of its own) instead
// of waiting on one: the sleeping wait's deadline over the whole loop. progressed() when
// something completed; check() past the deadline names this rank and `what` it waited for
// and ends the job as a wait does. MPI must be initialised.
class IdleDeadline {
 public:
  explicit IdleDeadline(std::string what);
  void progressed();
  void check() const;

 private:
  std::string what_;
  double limit_;
  std::chrono::steady_clock::time_point last_;
};

// MPI_Init_thread on construction unless MPI is already up (then it leaves MPI alone),
// MPI_Finalize on destruction if it initialised it. One per process, in main (or in
// the command that needs MPI, when most runs of a tool do not). Without mpirun the
// process is a world of one rank. Only the calling thread talks MPI.
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

// True when the process was started by mpirun (or another MPI launcher), read from the
// launcher's environment: a plain run can then skip MPI start-up altogether.
bool launched_by_mpi();

// This process's rank as the launcher numbered it, read from its environment before
// MPI starts (Open MPI, PMIx, then PMI); 0 without a launcher. A tool that starts MPI
// only after parsing its command line gives cli::set_first_process this == 0.
int launcher_rank();

// This process's host as MPI names it (ranks on one host share it). MPI must be initialised.
std::string processor_name();

// The MPI library, e.g. "Open MPI v4.1.4" (its first line up to a comma); works before
// MPI is initialised.
std::string mpi_library_version();

}  // namespace braid::comm
