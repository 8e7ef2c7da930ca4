#include "backend/cuda/check.cuh"

namespace braid::backend::cuda {

void check(cudaError_t err, const char* op) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that the next op starts clean
  throw CudaError(op, std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")");
}

void check_launch(const char* op) { check(cudaGetLastError(), op); }

}  // namespace braid::backend::cuda
