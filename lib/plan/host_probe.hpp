// Measures the host costs of a run on this machine (plan/host_costs.hpp): the CPUs this
// process may use, the wall time of starting a process and of starting an MPI job of 1,
// 2 and 4 ranks (spawning `SELF noop` and `mpirun -np R SELF mpi-noop`, the hidden verbs
// of braid-profile), the rate of first-touching fresh memory, and HDF5 files written and
// read through braid's weight-shard format (a file of one small tensor, of 64 small ones
// and of one of 64 MiB: the cost of a file, of each dataset in it, and of its bytes).
// Each figure is the median of `repeats`.
#pragma once

#include <string>
#include <vector>

#include "plan/host_costs.hpp"

namespace braid::plan {

struct HostProbeOptions {
  std::string self;                     // this executable (it answers `noop` and `mpi-noop`)
  std::vector<std::string> mpirun = {"mpirun", "--oversubscribe"};  // empty: no MPI start-up measured
  std::vector<int> mpi_ranks = {1, 2, 4};
  int repeats = 5;
};

HostCosts probe_host(const HostProbeOptions& o);

// The hidden verbs: `noop` returns at once; `mpi-noop` starts MPI, meets the other ranks
// at a barrier and ends.
int run_mpi_noop();

}  // namespace braid::plan
