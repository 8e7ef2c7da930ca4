// The whole search on every MPI rank: each rank anneals from its own random
// stream (stream = rank), and the best schedule (makespan, then peak memory,
// then the lowest rank) ends up on every rank. Works without mpirun (one rank).
#pragma once

#include "sched/anneal.hpp"

namespace braid::sched {

// MPI_Init on construction unless MPI is already up, MPI_Finalize on destruction
// if this object initialised it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owner_ = false;
  int rank_ = 0;
  int size_ = 1;
};

struct SearchResult {
  AnnealResult best;          // the winning schedule, on every rank
  int winner = 0;             // its rank
  int ranks = 1;
  std::uint64_t total_iterations = 0;  // over all ranks
  double seconds = 0;         // the slowest rank's time
  bool any_reached_bound = false;
  int ranks_at_bound = 0;       // ranks whose own search reached the bound
  int ranks_stopped = 0;        // ranks that stopped because another reached it first
};

// opt.stream is replaced by the rank. report is called on rank 0 only.
SearchResult parallel_search(const Problem& p, const Order& start, double bound, AnnealOptions opt,
                             const AnnealReport& report = {});

}  // namespace braid::sched
