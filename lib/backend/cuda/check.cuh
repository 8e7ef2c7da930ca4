// CUDA errors as exceptions that name the op: every runtime call and every launch of the
// CUDA backend goes through check() or check_launch(), so a failure reads
// "cuda backend: rmsnorm_forward: an illegal memory access was encountered", never a
// silent wrong result. Kernels are asynchronous: an error inside one surfaces at a later
// call, which then names itself and the error (the op at fault is among those issued
// since the last synchronisation).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace braid::backend::cuda {

// A failed CUDA runtime or library call (exit 1 in a tool: an environment failure or a bug).
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& op, const std::string& what)
      : std::runtime_error("cuda backend: " + op + ": " + what) {}
};

// Throws CudaError(op, cudaGetErrorString(err)) unless err is cudaSuccess.
void check(cudaError_t err, const char* op);
// After a kernel launch: the launch's own error (bad configuration, no kernel image for
// this GPU) named by op.
void check_launch(const char* op);

// Blocks of `threads` that cover n items, capped at `max_blocks` (kernels loop over the rest).
inline unsigned blocks_for(std::int64_t n, int threads, std::int64_t max_blocks = 65535) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

}  // namespace braid::backend::cuda
