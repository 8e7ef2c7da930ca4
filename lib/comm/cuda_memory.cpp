// comm::cuda_memory: the DeviceMemory of a CUDA device (device_group.hpp). The backend's
// streams are its own, so a copy or an NCCL call first waits for the whole device
// (cudaDeviceSynchronize): correct whatever stream the work was issued on, at the price
// of a device-wide wait per collective.
#include "comm/device_group.hpp"

#include "core/error.hpp"

#include <cuda_runtime.h>

#include <fmt/format.h>

#include <stdexcept>

namespace braid::comm {
namespace {

void check_buffer_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("CUDA {} (device buffers between ranks): {}", what, cudaGetErrorString(e)));
}

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {
    char bus[64] = {};
    if (const cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, device); e != cudaSuccess) {
      cudaGetLastError();
      throw UsageError(fmt::format("CUDA device {} cannot be used: {}", device, cudaGetErrorString(e)));
    }
    gpu_ = bus;
  }
  ~CudaMemory() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  bool holds(const void* p) const override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();   // clear it: an unknown pointer is host memory
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  void to_host(void* host, const void* device, std::size_t bytes) override {
    settle();
    check_buffer_call(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
  void to_device(void* device, const void* host, std::size_t bytes) override {
    settle();
    check_buffer_call(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    settle();   // from pageable memory cudaMemcpy may return before the bytes have landed
  }
  void settle() override {
    check_buffer_call(cudaSetDevice(device_), "cudaSetDevice");
    check_buffer_call(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void* stream() override {
    if (!stream_) {
      check_buffer_call(cudaSetDevice(device_), "cudaSetDevice");
      check_buffer_call(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    return stream_;
  }
  std::string gpu() const override { return gpu_; }

 private:
  int device_;
  std::string gpu_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<DeviceMemory> cuda_memory(int device) { return std::make_shared<CudaMemory>(device); }

}  // namespace braid::comm
