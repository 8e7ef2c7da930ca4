// Block-wide reductions for the kernels of the CUDA backend (device code only): warp
// shuffles, then one value per warp through shared memory. Every thread of the block
// must call them (they synchronise), and every thread gets the result.
#pragma once

#include <cuda_runtime.h>

namespace braid::backend::cuda {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  T r = lane < warps ? part[lane] : T(0);
  return warp_sum(r);
}

template <typename T>
__device__ T block_max(T v, T lowest) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  T r = lane < warps ? part[lane] : lowest;
  return warp_max(r);
}

// A weight operand of type W read as float (bf16 bits widened, f32 as it is).
__device__ __forceinline__ float load_as_float(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float load_as_float(const unsigned short* p, long long i) {
  return __uint_as_float(static_cast<unsigned>(p[i]) << 16);
}

}  // namespace braid::backend::cuda
