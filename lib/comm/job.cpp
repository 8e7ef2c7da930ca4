#include "comm/job.hpp"

#include "comm/mpi.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace braid::comm {
namespace {

class Solo final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int max_tag() const override { return 32767; }

  void send_bytes(const void*, std::size_t, int peer, int) override { no_peer("send", peer); }
  void recv_bytes(void*, std::size_t, int peer, int) override { no_peer("recv", peer); }
  Request isend_bytes(const void*, std::size_t, int peer, int) override { no_peer("isend", peer); }
  Request irecv_bytes(void*, std::size_t, int peer, int) override { no_peer("irecv", peer); }

  void all_reduce_elements(void*, std::size_t, DataType, ReduceOp) override {}
  Request iall_reduce_elements(void*, std::size_t, DataType, ReduceOp) override { return {}; }
  void all_gather_bytes(const void* mine, std::size_t bytes, void* all) override {
    if (bytes > 0 && all != mine) std::memmove(all, mine, bytes);
  }
  void all_gather_varying_bytes(void*, std::span<const std::size_t> bytes) override {
    if (bytes.size() != 1) throw std::logic_error(fmt::format("all_gather_varying: {} parts in a world of one rank", bytes.size()));
  }
  void broadcast_bytes(void*, std::size_t, int root) override {
    if (root != 0) no_peer("broadcast", root);
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  std::unique_ptr<Communicator> split(int color, int) override {
    return color < 0 ? nullptr : std::make_unique<Solo>();
  }

 private:
  [[noreturn]] static void no_peer(const char* what, int peer) {
    throw std::logic_error(fmt::format("{} with rank {} in a world of one rank (no MPI launcher)", what, peer));
  }
};

}  // namespace

std::unique_ptr<Communicator> solo() { return std::make_unique<Solo>(); }

Job::Job(int* argc, char*** argv) {
  if (launched_by_mpi()) {
    mpi_ = std::make_unique<MpiRuntime>(argc, argv);
    world_ = mpi_world();
  } else {
    world_ = solo();
  }
}

Job::~Job() = default;  // the world (declared after MPI) goes first, then MPI

}  // namespace braid::comm
