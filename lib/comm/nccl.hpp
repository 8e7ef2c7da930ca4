// The Communicator over NCCL: the same point to point, all-reduce, all-gather and
// broadcast as mpi.hpp, on device buffers, enqueued on a CUDA stream without staging
// through the host. Built only when CUDA and NCCL are found (CMake's BRAID_NCCL_ENABLED);
// elsewhere nccl_built() is false and nccl_group throws. MPI stays the fallback and the
// CPU path; device_group.hpp chooses between them.
//
//   auto world = comm::mpi_world();                              // processes, host memory
//   auto gpus = comm::nccl_group(*world, backend.current_stream().handle);
//   gpus->all_reduce(std::span<float>(device_grads, n), comm::ReduceOp::sum);
//
// Rank 0 makes an ncclUniqueId and broadcasts it over the bootstrap communicator, then
// every rank calls ncclCommInitRank on its current CUDA device (the caller picks it,
// e.g. the backend's). The bootstrap must outlive the group: barrier() and abort() use it.
//
// Blocking calls return when the operation is complete on the stream (they synchronise
// it); the nonblocking ones (isend, irecv, iall_reduce_elements) return a Request that
// waits on a CUDA event recorded after the operation. NCCL has no tags: between two
// ranks, messages match in the order they are issued, and `tag` is ignored (every
// caller in braid sends one stream of messages per peer pair at a time). A send to
// oneself is not supported (NCCL would need the matching receive in the same group).
#pragma once

#include "comm/communicator.hpp"

#include <memory>
#include <string>

namespace braid::comm {

// stream: a cudaStream_t (nullptr: the legacy default stream).
std::unique_ptr<Communicator> nccl_group(Communicator& bootstrap, void* stream);

// Whether this build has the NCCL communicator.
bool nccl_built();

// The NCCL library's version, e.g. "NCCL 2.28.9".
std::string nccl_version();

}  // namespace braid::comm
