#include "comm/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace braid::comm {
namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(fmt::format("NCCL {}: {}", what, ncclGetErrorString(r)));
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("CUDA {} (NCCL communicator): {}", what, cudaGetErrorString(e)));
}

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::f32: return ncclFloat32;
    case DataType::f64: return ncclFloat64;
    case DataType::i64: return ncclInt64;
  }
  throw std::logic_error("NCCL: unknown data type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
  }
  throw std::logic_error("NCCL: unknown reduction");
}

// A point on the stream: waits for the operation enqueued before it.
class EventPending final : public PendingOp {
 public:
  explicit EventPending(cudaStream_t stream) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  ~EventPending() override { cudaEventDestroy(event_); }
  void wait() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  bool test() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    check(e, "cudaEventQuery");
    return true;
  }

 private:
  cudaEvent_t event_{};
};

class NcclCommunicator final : public Communicator {
 public:
  // owned_bootstrap: the sub-group a split made (kept for barrier and abort), or null.
  NcclCommunicator(Communicator& bootstrap, std::unique_ptr<Communicator> owned_bootstrap, cudaStream_t stream)
      : boot_(&bootstrap), owned_(std::move(owned_bootstrap)), stream_(stream) {
    ncclUniqueId id{};
    if (boot_->rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    boot_->broadcast_bytes(&id, sizeof id, 0);
    check(ncclCommInitRank(&comm_, boot_->size(), id, boot_->rank()), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }
  int max_tag() const override { return INT_MAX; }

  void send_bytes(const void* data, std::size_t bytes, int peer, int tag) override {
    isend_bytes(data, bytes, peer, tag).wait();
  }
  void recv_bytes(void* data, std::size_t bytes, int peer, int tag) override {
    irecv_bytes(data, bytes, peer, tag).wait();
  }
  Request isend_bytes(const void* data, std::size_t bytes, int peer, int /*tag*/) override {
    self_check(peer);
    check(ncclSend(data, bytes, ncclChar, peer, comm_, stream_), "ncclSend");
    return after();
  }
  Request irecv_bytes(void* data, std::size_t bytes, int peer, int /*tag*/) override {
    self_check(peer);
    check(ncclRecv(data, bytes, ncclChar, peer, comm_, stream_), "ncclRecv");
    return after();
  }

  void all_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    iall_reduce_elements(data, count, type, op).wait();
  }
  Request iall_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    check(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comm_, stream_), "ncclAllReduce");
    return after();
  }
  void all_gather_bytes(const void* mine, std::size_t bytes, void* all) override {
    check(ncclAllGather(mine, all, bytes, ncclChar, comm_, stream_), "ncclAllGather");
    sync();
  }
  void all_gather_varying_bytes(void* all, std::span<const std::size_t> bytes) override {
    if (int(bytes.size()) != size()) throw std::invalid_argument("all_gather_varying_bytes: one size per rank");
    // ncclAllGather takes equal parts only: one in-place broadcast per rank, in a group.
    char* base = static_cast<char*>(all);
    check(ncclGroupStart(), "ncclGroupStart");
    std::size_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      check(ncclBroadcast(base + offset, base + offset, bytes[std::size_t(r)], ncclChar, r, comm_, stream_),
            "ncclBroadcast");
      offset += bytes[std::size_t(r)];
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
    sync();
  }
  void broadcast_bytes(void* data, std::size_t bytes, int root) override {
    check(ncclBroadcast(data, data, bytes, ncclChar, root, comm_, stream_), "ncclBroadcast");
    sync();
  }
  void barrier() override {
    sync();
    boot_->barrier();
  }
  [[noreturn]] void abort(int exit_code) override {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    boot_->abort(exit_code);
    std::_Exit(exit_code);  // the bootstrap's abort does not return; this says so to the compiler
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    // The bootstrap splits the same way; the new group gets its own NCCL communicator.
    std::unique_ptr<Communicator> sub = boot_->split(color, key);
    if (!sub) return nullptr;
    Communicator& ref = *sub;
    return std::make_unique<NcclCommunicator>(ref, std::move(sub), stream_);
  }

 private:
  void sync() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  Request after() { return Request(std::make_unique<EventPending>(stream_)); }
  void self_check(int peer) const {
    if (peer < 0 || peer >= size()) throw std::invalid_argument(fmt::format("NCCL: no rank {} of {}", peer, size()));
    if (peer == rank()) throw std::invalid_argument("NCCL: a message to oneself is not supported");
  }

  Communicator* boot_;
  std::unique_ptr<Communicator> owned_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> nccl_group(Communicator& bootstrap, void* stream) {
  return std::make_unique<NcclCommunicator>(bootstrap, nullptr, static_cast<cudaStream_t>(stream));
}

bool nccl_built() { return true; }

std::string nccl_version() {
  int v = 0;
  check(ncclGetVersion(&v), "ncclGetVersion");
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace braid::comm
