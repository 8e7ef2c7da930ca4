// A build without CUDA: no device memory to move (every backend is the host's).
#include "comm/device_group.hpp"

#include <stdexcept>

namespace braid::comm {

std::shared_ptr<DeviceMemory> cuda_memory(int) {
  throw std::logic_error("this build of braid has no CUDA: there is no device memory to move between ranks");
}

}  // namespace braid::comm
