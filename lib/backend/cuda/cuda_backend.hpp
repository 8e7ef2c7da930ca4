// The CUDA backend (one NVIDIA GPU): device memory from a caching, stream-ordered pool
// (cudaMallocFromPoolAsync on a pool that keeps what it is given back, so a training
// step's buffers are reused, never cudaMalloc'ed again), the Backend's streams and events
// as cudaStream_t / cudaEvent_t, cuBLAS for products and the kernels of this folder for
// every other op of Ops<float> (no f64: supports(op, f64) is false).
//
// Errors: a CUDA call that fails throws cuda::CudaError naming the op (exit 1 in a tool);
// device memory that runs out throws InputError naming the device, the allocation's size,
// what is in use and the peak (exit 2), never a crash.
#pragma once

#include "backend/backend.hpp"

#include <cstddef>
#include <memory>
#include <optional>

namespace braid::backend {

// Device memory of a CUDA backend, in bytes.
struct DeviceMemoryStats {
  std::size_t live = 0;      // allocated and not given back
  std::size_t peak = 0;      // the largest `live` seen
  std::size_t reserved = 0;  // held by the pool (live + cached for reuse)
  std::size_t free = 0;      // the device's free memory now (cudaMemGetInfo)
  std::size_t total = 0;     // the device's memory
};

// The CUDA backend on device `device` (cudaSetDevice for the calling thread). Throws
// UsageError when the device cannot be used. Only in builds with CUDA (BRAID_HAVE_CUDA).
std::unique_ptr<Backend> make_cuda_backend(int device);

// The memory figures of a CUDA backend; nullopt for any other backend.
std::optional<DeviceMemoryStats> device_memory_stats(Backend& be);

}  // namespace braid::backend
