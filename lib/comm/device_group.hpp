// A communicator for ranks whose buffers may live in device memory (a GPU the host cannot
// address): every call takes host or device pointers, and the group moves each kind the
// way that works (docs/parallel.md, "Device buffers between ranks"):
//
//   host memory                 the host communicator (MPI), as it is
//   device memory, collectives  NCCL when every rank of the run has a GPU of its own; the
//                               host communicator otherwise, staged through host memory
//                               (copied out, reduced or gathered by MPI, copied back)
//   device memory, send/recv    always staged through host memory over MPI (point to
//                               point is the rare path: checkpoint state to the writer;
//                               staging keeps the two ends' transports the same whatever
//                               memory each end passes)
//
// The transport is chosen once per run, collectively (every rank tells its host and GPU),
// and logged in one line by rank 0; BRAID_DEVICE_COMM=auto|nccl|mpi forces it (auto: NCCL
// where it can run). Sub-groups (split, group) keep the choice. The NCCL communicator of
// a group is made at its first collective on device memory (every rank makes the same
// collectives in the same order), so a group that never moves device buffers costs no
// NCCL start-up.
//
//   auto world = comm::mpi_world();
//   auto gpus = comm::cuda_group(*world, /*cuda device*/ 0);   // collective; logs the choice
//   comm::Mesh mesh(*gpus, tp);                  // its groups take device buffers too
//
// Every rank passes the same kind of memory to a collective (they run the same code on
// the same backend); a caller asks takes_device_memory() whether a communicator is one of
// these (a plain MPI communicator takes host memory only).
#pragma once

#include "comm/communicator.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace braid::comm {

// What the group needs to know of a device's memory. Copies are synchronous and come
// after the device work issued so far (on any stream of the process).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Whether p is the device's memory (else: host memory, given to MPI as it is).
  virtual bool holds(const void* p) const = 0;
  virtual void to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, std::size_t bytes) = 0;
  // Waits for the device work issued so far: NCCL then runs on stream() after it.
  virtual void settle() = 0;
  // The stream NCCL's work goes on (a cudaStream_t).
  virtual void* stream() = 0;
  // The GPU on this host, unique among the host's GPUs (a PCI bus id): ranks that give the
  // same (host, gpu) share a GPU, which NCCL cannot take.
  virtual std::string gpu() const = 0;
};

// How device buffers travel between the ranks of a group.
enum class DeviceTransport { nccl, mpi_staged };
// What the user asked for (BRAID_DEVICE_COMM).
enum class TransportRequest { automatic, nccl, mpi };

inline constexpr const char* kDeviceCommVariable = "BRAID_DEVICE_COMM";

// "auto", "nccl", "mpi"; UsageError naming the variable otherwise.
TransportRequest parse_transport_request(std::string_view s);
// BRAID_DEVICE_COMM, or automatic when unset or empty.
TransportRequest transport_request_from_env();

struct TransportChoice {
  DeviceTransport transport = DeviceTransport::mpi_staged;
  std::string reason;   // why, for the log line
  // "NCCL 2.21.5 (each of the 2 ranks has its own GPU)", "MPI, staged through host memory (...)"
  std::string describe() const;
};

// The decision, from what every rank reported: placements[r] is rank r's "host gpu".
// NCCL when asked for or automatic, built (nccl_built) and no two ranks share a GPU;
// MPI staging otherwise. UsageError when NCCL is asked for and cannot run.
TransportChoice choose_transport(TransportRequest request, bool nccl_built, std::span<const std::string> placements);

// Collective over `host` (which must outlive the group): gathers every rank's host and
// GPU, chooses the transport, logs it (rank 0, info) and returns the group.
// chosen: where to put the choice (may be null).
std::unique_ptr<Communicator> device_group(Communicator& host, std::shared_ptr<DeviceMemory> memory,
                                           TransportRequest request, TransportChoice* chosen = nullptr);

// The DeviceMemory of CUDA device `device` of this process (pointers the CUDA runtime
// calls device or managed memory; copies and settle wait for the whole device, since
// the backend's streams are its own). std::logic_error in a build without CUDA.
std::shared_ptr<DeviceMemory> cuda_memory(int device);

// device_group(host, cuda_memory(device), transport_request_from_env()).
std::unique_ptr<Communicator> cuda_group(Communicator& host, int device);

}  // namespace braid::comm
