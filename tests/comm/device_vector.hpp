// A device copy of a host vector, and back (the GPU communicator tests: test_nccl,
// test_gpu_group). Include after <boost/test/unit_test.hpp>.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

template <typename T>
struct DeviceVector {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceVector(const std::vector<T>& host) : n(host.size()) {
    BOOST_REQUIRE(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)) == cudaSuccess);
    BOOST_REQUIRE(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  std::span<T> span() { return {ptr, n}; }
};
