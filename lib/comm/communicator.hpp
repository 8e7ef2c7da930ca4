// lib/comm: communication between the processes of a job. Every message braid sends
// between ranks goes through this room, and no other room includes <mpi.h> (tests/comm
// checks it). What is here:
//
//   communicator.hpp  the Communicator interface: point to point with tags (blocking, and
//                     nonblocking with a Request), all-reduce (sum, min, max; blocking and
//                     nonblocking), all-gather (equal parts, and in place with a part per
//                     rank of any size), broadcast, barrier, abort, sub-groups (split,
//                     group), and all_reduce_bucketed (a long buffer as buckets in flight)
//   job.hpp           a process's job: MPI started under a launcher, else a world of one
//                     rank (solo()) and no MPI start-up
//   mpi.hpp           the MPI implementation (Open MPI on CPUs: host pointers), the
//                     process-wide MPI lifetime (MpiRuntime, one per process), mpi_world(),
//                     and what a tool asks of MPI outside a group (launched_by_mpi(), the
//                     host and library names)
//
//   comm::MpiRuntime mpi(&argc, &argv);               // MPI up ... MPI down
//   auto world = comm::mpi_world();                   // every rank
//   world->send(std::span<const float>(x), /*peer*/ 1, /*tag*/ 7);
//   comm::Request r = world->irecv(std::span<float>(y), 0, 7);
//   ... compute ...
//   r.wait();
//   world->all_reduce_sum(std::span<double>(norms));
//
// Messages between two ranks with the same tag arrive in the order they were sent.
// A buffer handed to isend/irecv must stay alive and untouched until its Request is
// waited on (or completes a test()).
//
//   device_group.hpp  a communicator that takes host and device buffers alike: device
//                     ones over NCCL where every rank has a GPU of its own, staged
//                     through host memory over MPI otherwise (BRAID_DEVICE_COMM forces it)
//   mesh.hpp          ranks = devices x tp: the tensor-parallel group and the cross group
//                     (one rank per device) a tool makes once per run
//   nccl.hpp          the NCCL implementation (built where CUDA and NCCL are found:
//                     CMake's BRAID_NCCL_ENABLED): device buffers, calls enqueued on a CUDA stream,
//                     Requests that wait on CUDA events, made from an MPI communicator
//                     that carries the bootstrap (rank 0's ncclUniqueId, broadcast):
//
//   auto world = comm::mpi_world();                        // processes, host memory
//   auto gpus = comm::nccl_group(*world, cuda_stream);     // ncclCommInitRank on every rank
//
// all_reduce_elements(data, count, dtype, op) has ncclAllReduce's shape, all_gather_bytes
// ncclAllGather's; split() splits the bootstrap and makes a new NCCL communicator; point
// to point maps onto ncclSend/ncclRecv, which have no tags (between a pair, messages match
// in the order they are issued). barrier() and abort() use the MPI bootstrap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace braid::comm {

// The state of one nonblocking operation, supplied by an implementation.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;   // true once complete (then wait() returns at once)
  // wait() that sleeps between polls (comm::wait_asleep); by default test() every 0.5 ms.
  virtual void wait_asleep();
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
  void wait_asleep();

 private:
  std::unique_ptr<PendingOp> op_;
};

void wait_all(std::span<Request> requests);
// Waits for r asleep (after a short spin, polling every 0.5 ms): for a rank that is done
// and waits on peers still working (a migration sender, a scorer whose ranks still
// generate), so that it leaves its core to them. Such a wait may last as long as the
// slowest peer's work, so its deadline (comm/mpi.hpp) is BRAID_COMM_TIMEOUT when that is
// set, and kDefaultIdleTimeoutSeconds otherwise.
void wait_asleep(Request& r);

class Communicator;
// The end of a job in which rank `root` works on alone (writing the results, timing
// something): root lets every other rank go, and they wait for it asleep (wait_asleep),
// not in MPI's finalisation, whose wait spins on a core root may be using. Collective:
// root calls it when done, the others when they are; `tag` is this call's alone.
void release_from(Communicator& comm, int root, int tag);

// Element types a reduction understands, and the reductions.
enum class DataType { f32, f64, i64 };
enum class ReduceOp { sum, min, max };

template <typename T> constexpr DataType data_type_of();
template <> constexpr DataType data_type_of<float>() { return DataType::f32; }
template <> constexpr DataType data_type_of<double>() { return DataType::f64; }
template <> constexpr DataType data_type_of<std::int64_t>() { return DataType::i64; }

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether the calls take device memory too (comm::device_group); a plain communicator
  // (MPI) moves host memory only, and a caller with device buffers stages them.
  virtual bool takes_device_memory() const { return false; }

  // Byte-level point to point; the typed helpers below are what callers use.
  virtual void send_bytes(const void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual void recv_bytes(void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual Request isend_bytes(const void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual Request irecv_bytes(void* data, std::size_t bytes, int peer, int tag) = 0;
  // The largest tag a message may carry (MPI guarantees at least 32767).
  virtual int max_tag() const = 0;

  // Element-wise reduction over every rank, in place: count elements of type at data.
  virtual void all_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) = 0;
  // The same, started and left in flight: data stays untouched by the caller until the
  // Request is waited on. Every rank starts the same reductions in the same order.
  // (ncclAllReduce on a stream, its Request an event.)
  virtual Request iall_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) = 0;
  // Every rank gives `bytes` bytes; `all` (size() x bytes) gets them in rank order.
  virtual void all_gather_bytes(const void* mine, std::size_t bytes, void* all) = 0;
  // In place, parts of any size: `all` holds rank r's part at byte offset
  // bytes[0] + ... + bytes[r - 1] (bytes: one entry per rank, the same on every rank);
  // on return every part is filled from its rank. (MPI_Allgatherv in place; on NCCL one
  // ncclBroadcast per rank in a group, since ncclAllGather takes equal parts only.)
  virtual void all_gather_varying_bytes(void* all, std::span<const std::size_t> bytes) = 0;

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

  // Sums, minima or maxima over every rank, in place (float, double, int64).
  template <typename T> void all_reduce(std::span<T> data, ReduceOp op) {
    all_reduce_elements(data.data(), data.size(), data_type_of<T>(), op);
  }
  void all_reduce_sum(std::span<float> data) { all_reduce(data, ReduceOp::sum); }
  void all_reduce_sum(std::span<double> data) { all_reduce(data, ReduceOp::sum); }
  void all_reduce_sum(std::span<std::int64_t> data) { all_reduce(data, ReduceOp::sum); }

  // In place over typed parts: all[offset of rank r .. + counts[r]) comes from rank r.
  template <typename T> void all_gather_varying(std::span<T> all, std::span<const std::size_t> counts) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<std::size_t> bytes(counts.begin(), counts.end());
    std::size_t total = 0;
    for (auto& b : bytes) { total += b; b *= sizeof(T); }
    if (total != all.size()) throw_size_mismatch("all_gather_varying", total, all.size());
    all_gather_varying_bytes(all.data(), bytes);
  }

  // Every rank's `mine` (the same length everywhere), concatenated in rank order.
  template <typename T> std::vector<T> all_gather(std::span<const T> mine) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> all(mine.size() * static_cast<std::size_t>(size()));
    all_gather_bytes(mine.data(), mine.size_bytes(), all.data());
    return all;
  }

  // The group of exactly these ranks of this communicator (collective over all of it;
  // nullptr on ranks not listed). Ranks keep the listed order.
  std::unique_ptr<Communicator> group(std::span<const int> ranks);

 private:
  [[noreturn]] static void throw_size_mismatch(const char* what, std::size_t parts, std::size_t buffer);
};

// A sum all-reduce of a long float buffer (gradients) in buckets of bucket_elements
// (0: one bucket), each a nonblocking reduction, at most `in_flight` of them started
// and not yet waited on; returns when every bucket is summed. Bucketing bounds what a
// transport stages at once and lets the reduction of one bucket overlap the next one's
// start (and, where a caller hands buckets over as they become ready, the compute
// still running). Collective: the same length and bucket size on every rank.
void all_reduce_bucketed(Communicator& comm, std::span<float> data, std::size_t bucket_elements,
                         std::size_t in_flight = 4);

}  // namespace braid::comm
