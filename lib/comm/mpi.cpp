#include "comm/mpi.hpp"

#include <mpi.h>

#include "core/cli.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace braid::comm {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(fmt::format("{}: {}", what, std::string(text, static_cast<std::size_t>(len))));
}

// MPI counts are int; bigger transfers go as runs of this many bytes.
constexpr std::size_t kMaxChunk = static_cast<std::size_t>(INT_MAX) / 2 + 1;

int count_of(std::size_t bytes, const char* what) {
  if (bytes > static_cast<std::size_t>(INT_MAX)) {
    throw std::length_error(fmt::format("{}: {} bytes is over MPI's int count", what, bytes));
  }
  return static_cast<int>(bytes);
}

// BRAID_COMM_TIMEOUT (seconds; 0 waits forever), read once per process; nullopt when unset.
std::optional<double> comm_timeout_set() {
  static const std::optional<double> seconds = []() -> std::optional<double> {
    const char* text = std::getenv("BRAID_COMM_TIMEOUT");
    if (text == nullptr || *text == '\0') return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(v) || v < 0) {
      throw UsageError(fmt::format(
          "BRAID_COMM_TIMEOUT is \"{}\": expected seconds, a number >= 0 (0 waits forever)", text));
    }
    return v;
  }();
  return seconds;
}

double comm_timeout() { return comm_timeout_set().value_or(kDefaultTimeoutSeconds); }
double idle_timeout() { return comm_timeout_set().value_or(kDefaultIdleTimeoutSeconds); }

// Ends the process when the blocking MPI call it watches has not returned within
// comm_timeout() seconds: such calls (MPI_Init, MPI_Comm_dup, ...) take no request to poll,
// and a peer that stopped leaves them waiting forever. mpirun then ends the other ranks.
class Watchdog {
 public:
  Watchdog(const char* what, int rank) : what_(what), rank_(rank) {
    const double limit = comm_timeout();
    if (limit <= 0) return;
    thread_ = std::thread([this, limit] {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(limit), [this] { return done_; })) return;
      std::fprintf(stderr,
                   "error: rank %d: %s did not return in %.6g s (BRAID_COMM_TIMEOUT): a peer stopped answering; "
                   "ending the job\n",
                   rank_, what_, limit);
      std::fflush(stderr);
      std::_Exit(kTimeoutExitCode);
    });
  }
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  const char* what_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// What a wait is for, to name it when a peer stops answering.
struct WaitFor {
  const char* op;        // "recv", "send", "all-reduce", ...
  int peer = -1;         // the peer's world rank, -1 for a collective
  int tag = -1;
};

int world_rank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Ends the whole job after a wait of `waited` seconds on `what` (with its peer, when known).
[[noreturn]] void end_job_after(const std::string& what, double waited) {
  std::fprintf(stderr,
               "error: rank %d: %s made no progress for %.6g s (BRAID_COMM_TIMEOUT): a peer stopped answering; "
               "ending the job\n",
               world_rank(), what.c_str(), waited);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, kTimeoutExitCode);
  std::_Exit(kTimeoutExitCode);
}

// Completes req by polling MPI_Test: a short spin (the fast path), then sleeps of
// growing length up to a millisecond (asleep: a short spin, then sleeps of 0.5 ms). With no
// completion for comm_timeout() seconds (asleep: idle_timeout()) it names this rank, the
// peer and the operation and ends the whole job.
void wait_for(MPI_Request* req, const WaitFor& what, bool asleep = false) {
  using Clock = std::chrono::steady_clock;
  const double limit = asleep ? idle_timeout() : comm_timeout();
  const auto t0 = Clock::now();
  auto sleep = std::chrono::microseconds(0);
  for (std::uint64_t polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (polls % 64 != 63) continue;
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (limit > 0 && waited >= limit) {
      std::string peer = what.peer >= 0 ? fmt::format(" with rank {}", what.peer) : std::string(" (collective)");
      if (what.tag >= 0) peer += fmt::format(" (tag {})", what.tag);
      end_job_after(what.op + peer, waited);
    }
    if (asleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      continue;
    }
    if (waited < 1e-3) continue;  // spin for the first millisecond
    sleep = std::min(std::chrono::microseconds(1000), std::max(std::chrono::microseconds(20), sleep * 2));
    std::this_thread::sleep_for(sleep);
  }
}

class MpiPending final : public PendingOp {
 public:
  MPI_Request req = MPI_REQUEST_NULL;
  WaitFor what{"wait"};
  void wait() override { wait_for(&req, what); }
  void wait_asleep() override { wait_for(&req, what, /*asleep=*/true); }
  bool test() override {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    int* ub = nullptr;
    int found = 0;
    check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &found), "MPI_Comm_get_attr");
    max_tag_ = found && ub ? *ub : 32767;
    comm_timeout();  // a bad BRAID_COMM_TIMEOUT is refused before any message
    // The world rank of every member, to name a peer in a timeout.
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    check(MPI_Comm_group(comm_, &mine), "MPI_Comm_group");
    check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    std::vector<int> ranks(static_cast<std::size_t>(size_));
    for (int i = 0; i < size_; ++i) ranks[static_cast<std::size_t>(i)] = i;
    world_of_.assign(ranks.size(), -1);
    check(MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_of_.data()), "MPI_Group_translate_ranks");
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
  }
  ~MpiCommunicator() override {
    int down = 0;
    MPI_Finalized(&down);
    if (!down) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int max_tag() const override { return max_tag_; }

  void send_bytes(const void* data, std::size_t bytes, int peer, int tag) override {
    in_chunks(const_cast<void*>(data), bytes, [&](char* p, std::size_t n, MPI_Request* req) {
      check(MPI_Isend(p, count_of(n, "send"), MPI_BYTE, peer, tag, comm_, req), "MPI_Isend");
      wait_for(req, {"send", world_rank_of(peer), tag});
    });
  }
  void recv_bytes(void* data, std::size_t bytes, int peer, int tag) override {
    in_chunks(data, bytes, [&](char* p, std::size_t n, MPI_Request* req) {
      check(MPI_Irecv(p, count_of(n, "recv"), MPI_BYTE, peer, tag, comm_, req), "MPI_Irecv");
      wait_for(req, {"recv", world_rank_of(peer), tag});
    });
  }
  // A blocking transfer in runs of at most kMaxChunk bytes (MPI counts are int), each one
  // started and waited on by `one` (at least one run, so that empty messages still match).
  template <typename One>
  static void in_chunks(void* data, std::size_t bytes, One&& one) {
    auto* p = static_cast<char*>(data);
    do {
      const std::size_t n = std::min(bytes, kMaxChunk);
      MPI_Request req = MPI_REQUEST_NULL;
      one(p, n, &req);
      p += n;
      bytes -= n;
    } while (bytes > 0);
  }
  Request isend_bytes(const void* data, std::size_t bytes, int peer, int tag) override {
    auto op = std::make_unique<MpiPending>();
    op->what = {"send", world_rank_of(peer), tag};
    check(MPI_Isend(data, count_of(bytes, "isend"), MPI_BYTE, peer, tag, comm_, &op->req), "MPI_Isend");
    return Request(std::move(op));
  }
  Request irecv_bytes(void* data, std::size_t bytes, int peer, int tag) override {
    auto op = std::make_unique<MpiPending>();
    op->what = {"recv", world_rank_of(peer), tag};
    check(MPI_Irecv(data, count_of(bytes, "irecv"), MPI_BYTE, peer, tag, comm_, &op->req), "MPI_Irecv");
    return Request(std::move(op));
  }

  void all_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    const MPI_Op mpi_op = op == ReduceOp::sum ? MPI_SUM : op == ReduceOp::min ? MPI_MIN : MPI_MAX;
    switch (type) {
      case DataType::f32: return reduce(static_cast<float*>(data), count, MPI_FLOAT, mpi_op);
      case DataType::f64: return reduce(static_cast<double*>(data), count, MPI_DOUBLE, mpi_op);
      case DataType::i64: return reduce(static_cast<std::int64_t*>(data), count, MPI_INT64_T, mpi_op);
    }
  }
  Request iall_reduce_elements(void* data, std::size_t count, DataType type, ReduceOp op) override {
    const MPI_Op mpi_op = op == ReduceOp::sum ? MPI_SUM : op == ReduceOp::min ? MPI_MIN : MPI_MAX;
    const MPI_Datatype t = type == DataType::f32 ? MPI_FLOAT : type == DataType::f64 ? MPI_DOUBLE : MPI_INT64_T;
    if (count > static_cast<std::size_t>(INT_MAX)) {
      throw std::length_error(fmt::format("iall_reduce: {} elements is over MPI's int count (use buckets)", count));
    }
    auto pending = std::make_unique<MpiPending>();
    pending->what = {"all-reduce"};
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), t, mpi_op, comm_, &pending->req),
          "MPI_Iallreduce");
    return Request(std::move(pending));
  }
  void all_gather_varying_bytes(void* all, std::span<const std::size_t> bytes) override {
    if (bytes.size() != static_cast<std::size_t>(size_)) {
      throw std::invalid_argument(fmt::format("all_gather_varying: {} parts for {} ranks", bytes.size(), size_));
    }
    std::size_t total = 0;
    for (std::size_t b : bytes) total += b;
    auto* base = static_cast<char*>(all);
    if (total <= static_cast<std::size_t>(INT_MAX)) {
      std::vector<int> counts(bytes.size()), displs(bytes.size());
      int at = 0;
      for (std::size_t r = 0; r < bytes.size(); ++r) {
        counts[r] = static_cast<int>(bytes[r]);
        displs[r] = at;
        at += counts[r];
      }
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, counts.data(), displs.data(), MPI_BYTE, comm_,
                            &req),
            "MPI_Iallgatherv");
      wait_for(&req, {"all-gather"});
      return;
    }
    // Past int counts: each rank's part broadcast from it (broadcast_bytes runs in chunks).
    std::size_t at = 0;
    for (int r = 0; r < size_; ++r) {
      broadcast_bytes(base + at, bytes[static_cast<std::size_t>(r)], r);
      at += bytes[static_cast<std::size_t>(r)];
    }
  }
  void all_gather_bytes(const void* mine, std::size_t bytes, void* all) override {
    const int n = count_of(bytes, "all-gather");
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_, &req), "MPI_Iallgather");
    wait_for(&req, {"all-gather"});
  }

  void broadcast_bytes(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    do {
      const std::size_t n = std::min(bytes, kMaxChunk);
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Ibcast(p, count_of(n, "broadcast"), MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
      wait_for(&req, {"broadcast", world_rank_of(root)});
      p += n;
      bytes -= n;
    } while (bytes > 0);
  }
  void barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait_for(&req, {"barrier"});
  }
  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this says so to the compiler
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    const Watchdog watch("MPI_Comm_split", world_rank());
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(sub);
  }

 private:
  template <typename T>
  void reduce(T* data, std::size_t n, MPI_Datatype type, MPI_Op op) {
    // Chunked so that element counts stay within int.
    const std::size_t chunk = kMaxChunk / sizeof(T);
    do {
      const std::size_t k = std::min(n, chunk);
      MPI_Request req = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(k), type, op, comm_, &req), "MPI_Iallreduce");
      wait_for(&req, {"all-reduce"});
      data += k;
      n -= k;
    } while (n > 0);
  }

  int world_rank_of(int r) const {
    return r >= 0 && r < size_ ? world_of_[static_cast<std::size_t>(r)] : r;
  }

  MPI_Comm comm_;
  std::vector<int> world_of_;  // member -> world rank
  int rank_ = 0;
  int size_ = 1;
  int max_tag_ = 32767;
};

}  // namespace

IdleDeadline::IdleDeadline(std::string what)
    : what_(std::move(what)), limit_(idle_timeout()), last_(std::chrono::steady_clock::now()) {}

void IdleDeadline::progressed() { last_ = std::chrono::steady_clock::now(); }

void IdleDeadline::check() const {
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
  if (limit_ > 0 && waited >= limit_) end_job_after(what_, waited);
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int up = 0;
  MPI_Initialized(&up);
  if (!up) {
    // Only the calling thread talks MPI; the compute thread pool never does.
    int provided = 0;
    const Watchdog watch("MPI_Init", launcher_rank());
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owner_ = true;
  }
  int rank = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  cli::set_first_process(rank == 0);
}

MpiRuntime::~MpiRuntime() {
  int down = 0;
  MPI_Finalized(&down);
  if (!owner_ || down) return;
  std::optional<Watchdog> watch;
  try {
    watch.emplace("MPI_Finalize", world_rank());
  } catch (const UsageError&) {  // a bad BRAID_COMM_TIMEOUT, refused already: nothing to watch with
  }
  MPI_Finalize();
}

std::unique_ptr<Communicator> mpi_world() {
  MPI_Comm dup = MPI_COMM_NULL;
  const Watchdog watch("MPI_Comm_dup", world_rank());
  check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
  return std::make_unique<MpiCommunicator>(dup);
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 0;
}

bool launched_by_mpi() {
  // Open MPI and PMIx launchers, then PMI (MPICH's hydra, Slurm's srun).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(len));
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);  // allowed before MPI_Init
  std::string v(text, static_cast<std::size_t>(len));
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  if (auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
  return v;
}

}  // namespace braid::comm
