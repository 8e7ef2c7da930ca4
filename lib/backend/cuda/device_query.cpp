#include "backend/cuda/device_query.hpp"

#include <cuda_runtime.h>

namespace braid::cuda {

DeviceQuery query_devices() {
  DeviceQuery q;
  cudaRuntimeGetVersion(&q.runtime_version);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    q.error = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return q;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.sm_major = prop.major;
    d.sm_minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    d.memory_bytes = prop.totalGlobalMem;
    q.devices.push_back(std::move(d));
  }
  if (q.devices.empty() && q.error.empty()) q.error = "no CUDA device";
  return q;
}

}  // namespace braid::cuda
