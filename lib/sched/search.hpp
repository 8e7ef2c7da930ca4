// The whole search on every rank of a communicator: each rank anneals from its own
// random stream (stream = rank); the ranks meet at fixed iteration counts to stop
// together and (opt.share_best) to pass the best schedule round; the best schedule
// (makespan, then peak memory, then the lowest rank) ends up on every rank. A world
// of one rank is a plain anneal.
#pragma once

#include "comm/communicator.hpp"
#include "sched/anneal.hpp"

namespace braid::sched {

struct SearchResult {
  AnnealResult best;          // the winning schedule, on every rank
  int winner = 0;             // its rank
  int ranks = 1;
  std::uint64_t total_iterations = 0;  // over all ranks
  double seconds = 0;         // the slowest rank's time
  bool any_reached_bound = false;
  int ranks_at_bound = 0;       // ranks whose own search reached the bound
  int ranks_stopped = 0;        // ranks that stopped because another reached it first
  std::uint64_t adopted = 0;    // schedules ranks took from a better peer (over all ranks)
};

// Collective over world. opt.stream is replaced by the rank. report is called on rank 0 only.
SearchResult parallel_search(comm::Communicator& world, const Problem& p, const Order& start, double bound,
                             AnnealOptions opt, const AnnealReport& report = {});

}  // namespace braid::sched
