// What a run pays outside the model's passes, on the machine at hand: starting a process,
// starting an MPI job, first-touching freshly allocated memory, and reading and writing
// HDF5 files. `braid-profile measure` measures them (plan/host_probe.hpp) into the
// profile's "host" block; a whole-iteration prediction (plan/run_model.hpp) adds them to
// the passes' times. A profile without the block (analytic, or measured before it
// existed) predicts the passes alone.
//
//   "host": {"cores": 2, "process_start_ms": 28.1,
//            "mpi_start_ms": {"ranks": [1, 2, 4], "values": [412, 455, 560]},
//            "touch_gbs": 3.9, "file_ms": 2.1, "dataset_ms": 0.4, "write_gbs": 0.9, "read_gbs": 2.4}
#pragma once

#include <cstdint>

#include "core/json.hpp"
#include "plan/table.hpp"

namespace braid::plan {

struct HostCosts {
  int cores = 0;                // CPUs this process may run on; 0: not measured
  double process_start = 0;     // s: spawning a braid tool until its main returns at once
  Table1 mpi_start;             // ranks -> s: `mpirun -np R` of a program that starts MPI and ends
  double touch_bandwidth = 0;   // bytes/s: the first write to freshly allocated memory
  double file_latency = 0;      // s per HDF5 file written (create, attributes, seal, rename) or opened
  double dataset_latency = 0;   // s per dataset of a file written or read, beyond its bytes
  double write_bandwidth = 0;   // bytes/s of datasets written (checksums included)
  double read_bandwidth = 0;    // bytes/s of datasets read (checksums verified)

  bool measured() const { return cores > 0; }
  // Seconds to start `ranks` processes: one plain process, or an MPI job under mpirun.
  double start(int ranks, bool mpirun) const;
  double touch(double bytes) const;
  // `files` files of `datasets` datasets each, `bytes` in all.
  double write(double bytes, double files = 1, double datasets = 1) const;
  double read(double bytes, double files = 1, double datasets = 1) const;
};

ordered_json host_to_json(const HostCosts& h);
// Every problem recorded in c; `where` is its path in the document.
HostCosts host_from_json(const json& j, Checker& c, const std::string& where);

}  // namespace braid::plan
