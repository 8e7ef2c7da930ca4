// A group of processes that exchange buffers: point-to-point messages with tags,
// nonblocking variants that return a Request, sum all-reduce, broadcast, barrier, and
// sub-groups. The fused training pipeline and sample migration talk through this
// interface only, so that a GPU implementation (NCCL, with device pointers) can sit
// behind it later; today there is the MPI one (dist/mpi.hpp).
//
//   dist::MpiRuntime mpi(&argc, &argv);               // MPI_Init ... MPI_Finalize
//   auto world = dist::mpi_world();                   // every rank
//   world->send(std::span<const float>(x), /*peer*/ 1, /*tag*/ 7);
//   dist::Request r = world->irecv(std::span<float>(y), 0, 7);
//   ... compute ...
//   r.wait();
//   world->all_reduce_sum(std::span<double>(norms));
//
// Messages between two ranks with the same tag arrive in the order they were sent.
// A buffer handed to isend/irecv must stay alive and untouched until its Request is
// waited on (or completes a test()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace braid::dist {

// The state of one nonblocking operation, supplied by an implementation.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;   // true once complete (then wait() returns at once)
};

// A nonblocking send or receive. Move-only; waits in its destructor if still pending,
// so that a buffer is never released under a transfer.
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<PendingOp> op) : op_(std::move(op)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& o) noexcept;
  ~Request();

  bool active() const { return op_ != nullptr; }
  void wait();
  bool test();

 private:
  std::unique_ptr<PendingOp> op_;
};

void wait_all(std::span<Request> requests);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Byte-level point to point; the typed helpers below are what callers use.
  virtual void send_bytes(const void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual void recv_bytes(void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual Request isend_bytes(const void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual Request irecv_bytes(void* data, std::size_t bytes, int peer, int tag) = 0;
  // The largest tag a message may carry (MPI guarantees at least 32767).
  virtual int max_tag() const = 0;

  // Element-wise sums over every rank, in place.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  virtual void all_reduce_sum(std::span<std::int64_t> data) = 0;

  // root's bytes to every rank (same size everywhere).
  virtual void broadcast_bytes(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the job with this exit code: what a rank does when it fails
  // halfway through work its peers are blocked on (they would wait forever).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // Collective over this group: ranks passing the same color form a new group, ordered
  // by key (then by rank here). A negative color: this rank joins none (nullptr).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Typed helpers over the byte calls (trivially copyable element types).
  template <typename T> void send(std::span<const T> data, int peer, int tag) {
    static_assert(std::is_trivially_copyable_v<T>);
    send_bytes(data.data(), data.size_bytes(), peer, tag);
  }
  template <typename T> void recv(std::span<T> data, int peer, int tag) {
    static_assert(std::is_trivially_copyable_v<T>);
    recv_bytes(data.data(), data.size_bytes(), peer, tag);
  }
  template <typename T> Request isend(std::span<const T> data, int peer, int tag) {
    static_assert(std::is_trivially_copyable_v<T>);
    return isend_bytes(data.data(), data.size_bytes(), peer, tag);
  }
  template <typename T> Request irecv(std::span<T> data, int peer, int tag) {
    static_assert(std::is_trivially_copyable_v<T>);
    return irecv_bytes(data.data(), data.size_bytes(), peer, tag);
  }
  template <typename T> void broadcast(std::span<T> data, int root) {
    static_assert(std::is_trivially_copyable_v<T>);
    broadcast_bytes(data.data(), data.size_bytes(), root);
  }
  // A string whose length only root knows beforehand.
  void broadcast(std::string& text, int root);

  // The group of exactly these ranks of this communicator (collective over all of it;
  // nullptr on ranks not listed). Ranks keep the listed order.
  std::unique_ptr<Communicator> group(std::span<const int> ranks);
};

}  // namespace braid::dist
