// A job of two ranks in which rank 1 stops answering: it sleeps ("sleep") or stops
// itself with SIGSTOP ("stop") while rank 0 waits on it in a receive ("recv"), a
// barrier ("barrier"), a sleeping receive ("asleep": comm::wait_asleep, the wait of a
// rank done with its part) or a loop that polls a receive ("poll": comm::IdleDeadline, the
// fused rollout's board); or rank 1 stops before MPI starts ("stop init": rank 0 waits
// inside MPI's initialisation). Run by comm_timeout.sh under a small BRAID_COMM_TIMEOUT: the job
// must end on its own, naming the rank and the operation.
#include "comm/mpi.hpp"

#include <chrono>
#include <csignal>
#include <exception>
#include <memory>
#include <cstdio>
#include <span>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: stalled_peer sleep|stop recv|barrier|asleep|poll|init\n");
    return 2;
  }
  const std::string how = argv[1], op = argv[2];
  if (op == "init" && braid::comm::launcher_rank() == 1) std::raise(SIGSTOP);
  std::unique_ptr<braid::comm::MpiRuntime> mpi;
  std::unique_ptr<braid::comm::Communicator> world;
  try {
    mpi = std::make_unique<braid::comm::MpiRuntime>(&argc, &argv);
    world = braid::comm::mpi_world();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stalled_peer: error: %s\n", e.what());
    return 2;
  }
  // A first exchange that completes: the fast path is unaffected.
  world->barrier();
  if (world->rank() == 1) {
    if (how == "stop") std::raise(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  float x = 0;
  if (op == "recv" || op == "asleep" || op == "poll") {
    if (world->rank() == 0) {
      braid::comm::Request r = world->irecv(std::span<float>(&x, 1), 1, 7);
      if (op == "asleep") {
        braid::comm::wait_asleep(r);
      } else if (op == "poll") {
        const braid::comm::IdleDeadline idle("a polled recv from rank 1");
        while (!r.test()) {
          idle.check();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      } else {
        r.wait();
      }
    } else {
      world->send(std::span<const float>(&x, 1), 0, 7);
    }
  } else {
    world->barrier();
  }
  std::printf("rank %d: the peer answered\n", world->rank());
  return 0;
}
