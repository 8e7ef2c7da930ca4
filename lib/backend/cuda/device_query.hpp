// What CUDA devices this process sees (make_backend's check of `cuda:N`, `braid info`).
// Safe to call on machines without a GPU or driver: the count is then 0 and the reason is
// in `error`. Plain C++ over the CUDA runtime API; built only when CUDA is on.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  std::size_t memory_bytes = 0;
};

struct DeviceQuery {
  std::vector<DeviceInfo> devices;
  std::string error;  // why none were found, when none were
  int runtime_version = 0;
};

DeviceQuery query_devices();

}  // namespace braid::cuda
