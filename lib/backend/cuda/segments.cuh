// Finding a query's or key's segment in the kernels of the CUDA backend (device code
// only): a binary search over the batch's segments by one of their enumeration starts.
#pragma once

#include "backend/cuda/attention.cuh"

#include <cstdint>

namespace braid::backend::cuda {

// The segment whose run in the enumeration that kStart starts (DeviceSegment::q_first,
// k_first, q_pad_first or k_pad_first) holds position pos: the last segment starting at or
// before pos (empty segments have empty runs).
template <std::int64_t DeviceSegment::*kStart>
__device__ const DeviceSegment& segment_at(const DeviceSegment* segs, int n, std::int64_t pos) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segs[mid].*kStart <= pos) lo = mid; else hi = mid - 1;
  }
  return segs[lo];
}

}  // namespace braid::backend::cuda
