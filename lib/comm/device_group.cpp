#include "comm/device_group.hpp"

#include "comm/mpi.hpp"
#include "comm/nccl.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

namespace braid::comm {

TransportRequest parse_transport_request(std::string_view s) {
  if (s == "auto") return TransportRequest::automatic;
  if (s == "nccl") return TransportRequest::nccl;
  if (s == "mpi") return TransportRequest::mpi;
  throw UsageError(fmt::format("{}='{}': how device buffers travel between ranks is auto, nccl or mpi",
                               kDeviceCommVariable, s));
}

TransportRequest transport_request_from_env() {
  const char* v = std::getenv(kDeviceCommVariable);
  if (v == nullptr || *v == '\0') return TransportRequest::automatic;
  return parse_transport_request(v);
}

std::string TransportChoice::describe() const {
  if (transport == DeviceTransport::nccl) return fmt::format("{} ({})", nccl_version(), reason);
  return fmt::format("MPI, staged through host memory ({})", reason);
}

TransportChoice choose_transport(TransportRequest request, bool nccl_built, std::span<const std::string> placements) {
  const std::string forced = fmt::format("{}={}", kDeviceCommVariable, request == TransportRequest::nccl ? "nccl" : "mpi");
  if (request == TransportRequest::mpi) return {DeviceTransport::mpi_staged, forced};
  if (!nccl_built) {
    if (request == TransportRequest::nccl)
      throw UsageError(forced + ": this build of braid has no NCCL (CUDA and NCCL were not found when it was configured)");
    return {DeviceTransport::mpi_staged, "this build has no NCCL"};
  }
  std::map<std::string, std::size_t> first;
  for (std::size_t r = 0; r < placements.size(); ++r) {
    const auto [it, fresh] = first.emplace(placements[r], r);
    if (fresh) continue;
    const std::string shared =
        fmt::format("ranks {} and {} share the GPU {}", it->second, r, placements[r]);
    if (request == TransportRequest::nccl) {
      throw UsageError(fmt::format("{}: {}, and NCCL takes one GPU per rank (give each rank its own, e.g. "
                                   "CUDA_VISIBLE_DEVICES from the launcher's local rank, or unset it)",
                                   forced, shared));
    }
    return {DeviceTransport::mpi_staged, shared};
  }
  if (request == TransportRequest::nccl) return {DeviceTransport::nccl, forced};
  return {DeviceTransport::nccl, fmt::format("each of the {} ranks has its own GPU", placements.size())};
}

namespace {

// A nonblocking transfer of a host copy of device memory: the copy lives as long as the
// transfer, and a receive (back_to != nullptr) copies it to the device once complete.
class StagedPending final : public PendingOp {
 public:
  StagedPending(Request inner, std::vector<char> host, DeviceMemory* memory, void* back_to)
      : inner_(std::move(inner)), host_(std::move(host)), memory_(memory), back_to_(back_to) {}
  void wait() override {
    inner_.wait();
    land();
  }
  void wait_asleep() override {
    inner_.wait_asleep();
    land();
  }
  bool test() override {
    if (!inner_.test()) return false;
    land();
    return true;
  }

 private:
  void land() {
    if (back_to_ != nullptr && !host_.empty()) memory_->to_device(back_to_, host_.data(), host_.size());
    back_to_ = nullptr;
  }
  Request inner_;
  std::vector<char> host_;
  DeviceMemory* memory_;
  void* back_to_;
};

std::size_t element_bytes(DataType t) {
  switch (t) {
    case DataType::f32: return 4;
    case DataType::f64: return 8;
    case DataType::i64: return 8;
  }
  throw std::logic_error("unknown data type");
}

class DeviceGroup final : public Communicator {
 public:
  DeviceGroup(Communicator& host, std::unique_ptr<Communicator> owned, std::shared_ptr<DeviceMemory> memory,
              DeviceTransport transport)
      : host_(&host), owned_(std::move(owned)), mem_(std::move(memory)), transport_(transport) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  bool takes_device_memory() const override { return true; }
  int max_tag() const override { return host_->max_tag(); }

  // Point to point: always over the host communicator.
  void send_bytes(const void* data, std::size_t bytes, int peer, int tag) override {
    if (!device(data)) return host_->send_bytes(data, bytes, peer, tag);
    const std::vector<char> h = out(data, bytes);
    host_->send_bytes(h.data(), bytes, peer, tag);
  }
  void recv_bytes(void* data, std::size_t bytes, int peer, int tag) override {
    if (!device(data)) return host_->recv_bytes(data, bytes, peer, tag);
    std::vector<char> h(bytes);
    host_->recv_bytes(h.data(), bytes, peer, tag);
    in(data, h);
  }
  Request isend_bytes(const void* data, std::size_t bytes, int peer, int tag) override {
    if (!device(data)) return host_->isend_bytes(data, bytes, peer, tag);
    std::vector<char> h = out(data, bytes);
    Request r = host_->isend_bytes(h.data(), bytes, peer, tag);
    return Request(std::make_unique<StagedPending>(std::move(r), std::move(h), mem_.get(), nullptr));
  }
  Request irecv_bytes(void* data, std::size_t bytes, int peer, int tag) override {
    if (!device(data)) return host_->irecv_bytes(data, bytes, peer, tag);
    std::vector<char> h(bytes);
    Request r = host_->irecv_bytes(h.data(), bytes, peer, tag);
    return Request(std::make_unique<StagedPending>(std::move(r), std::move(h), mem_.get(), data));
  }

  void all_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    if (!device(data)) return host_->all_reduce_elements(data, count, type, op);
    if (use_nccl()) {
      mem_->settle();
      return nccl().all_reduce_elements(data, count, type, op);
    }
    std::vector<char> h = out(data, count * element_bytes(type));
    host_->all_reduce_elements(h.data(), count, type, op);
    in(data, h);
  }
  Request iall_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    if (!device(data)) return host_->iall_reduce_elements(data, count, type, op);
    if (use_nccl()) {
      mem_->settle();
      return nccl().iall_reduce_elements(data, count, type, op);
    }
    std::vector<char> h = out(data, count * element_bytes(type));
    Request r = host_->iall_reduce_elements(h.data(), count, type, op);
    return Request(std::make_unique<StagedPending>(std::move(r), std::move(h), mem_.get(), data));
  }
  void all_gather_bytes(const void* mine, std::size_t bytes, void* all) override {
    const bool dm = device(mine), da = device(all);
    if (!dm && !da) return host_->all_gather_bytes(mine, bytes, all);
    if (dm && da && use_nccl()) {
      mem_->settle();
      return nccl().all_gather_bytes(mine, bytes, all);
    }
    std::vector<char> m, a;
    if (dm) m = out(mine, bytes);
    if (da) a.resize(bytes * std::size_t(size()));
    host_->all_gather_bytes(dm ? m.data() : mine, bytes, da ? a.data() : all);
    if (da) in(all, a);
  }
  void all_gather_varying_bytes(void* all, std::span<const std::size_t> bytes) override {
    if (!device(all)) return host_->all_gather_varying_bytes(all, bytes);
    if (use_nccl()) {
      mem_->settle();
      return nccl().all_gather_varying_bytes(all, bytes);
    }
    std::vector<char> h = out(all, std::accumulate(bytes.begin(), bytes.end(), std::size_t(0)));
    host_->all_gather_varying_bytes(h.data(), bytes);
    in(all, h);
  }
  void broadcast_bytes(void* data, std::size_t bytes, int root) override {
    if (!device(data)) return host_->broadcast_bytes(data, bytes, root);
    if (use_nccl()) {
      mem_->settle();
      return nccl().broadcast_bytes(data, bytes, root);
    }
    std::vector<char> h = rank() == root ? out(data, bytes) : std::vector<char>(bytes);
    host_->broadcast_bytes(h.data(), bytes, root);
    if (rank() != root) in(data, h);
  }
  void barrier() override { host_->barrier(); }
  [[noreturn]] void abort(int exit_code) override {
    host_->abort(exit_code);
    std::_Exit(exit_code);  // the host's abort does not return; this says so to the compiler
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> sub = host_->split(color, key);
    if (!sub) return nullptr;
    Communicator& ref = *sub;
    return std::make_unique<DeviceGroup>(ref, std::move(sub), mem_, transport_);
  }

 private:
  bool device(const void* p) const { return p != nullptr && mem_->holds(p); }
  // A group of one has nothing to exchange: staging is a copy there, and no NCCL is made.
  bool use_nccl() const { return transport_ == DeviceTransport::nccl && size() > 1; }
  Communicator& nccl() {
    if (!nccl_) nccl_ = nccl_group(*host_, mem_->stream());
    return *nccl_;
  }
  std::vector<char> out(const void* device, std::size_t bytes) {
    std::vector<char> h(bytes);
    if (bytes > 0) mem_->to_host(h.data(), device, bytes);
    return h;
  }
  void in(void* device, const std::vector<char>& h) {
    if (!h.empty()) mem_->to_device(device, h.data(), h.size());
  }

  Communicator* host_;
  std::unique_ptr<Communicator> owned_;   // a split's host group
  std::shared_ptr<DeviceMemory> mem_;
  DeviceTransport transport_;
  std::unique_ptr<Communicator> nccl_;    // made at the first collective on device memory; goes first
};

// Every rank's string, in rank order.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const std::int64_t n = std::int64_t(mine.size());
  const std::vector<std::int64_t> sizes = comm.all_gather(std::span<const std::int64_t>(&n, 1));
  std::vector<std::size_t> counts(sizes.begin(), sizes.end());
  std::vector<std::size_t> offsets(counts.size(), 0);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::string all(std::accumulate(counts.begin(), counts.end(), std::size_t(0)), '\0');
  all.replace(offsets[std::size_t(comm.rank())], mine.size(), mine);
  comm.all_gather_varying(std::span<char>(all.data(), all.size()), counts);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < counts.size(); ++r) out.push_back(all.substr(offsets[r], counts[r]));
  return out;
}

}  // namespace

std::unique_ptr<Communicator> device_group(Communicator& host, std::shared_ptr<DeviceMemory> memory,
                                           TransportRequest request, TransportChoice* chosen) {
  const std::vector<std::string> placements =
      all_gather_strings(host, fmt::format("{} {}", processor_name(), memory->gpu()));
  const TransportChoice choice = choose_transport(request, nccl_built(), placements);
  if (host.rank() == 0) log::info("device buffers between ranks: {}", choice.describe());
  if (chosen) *chosen = choice;
  return std::make_unique<DeviceGroup>(host, nullptr, std::move(memory), choice.transport);
}

std::unique_ptr<Communicator> cuda_group(Communicator& host, int device) {
  return device_group(host, cuda_memory(device), transport_request_from_env());
}

}  // namespace braid::comm
