// A build without NCCL (no CUDA, or no nccl.h): device buffers travel staged over MPI.
#include "comm/nccl.hpp"

#include <stdexcept>

namespace braid::comm {

bool nccl_built() { return false; }

std::unique_ptr<Communicator> nccl_group(Communicator&, void*) {
  throw std::logic_error("this build of braid has no NCCL (CUDA and NCCL were not found when it was configured)");
}

std::string nccl_version() { return "no NCCL"; }

}  // namespace braid::comm
