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
  Order own_best;               // this rank's own best schedule, and its makespan
  double own_makespan = 0;
};

// Collective over world. opt.stream is replaced by the rank. report is called on rank 0 only.
SearchResult parallel_search(comm::Communicator& world, const Problem& p, const Order& start, double bound,
                             AnnealOptions opt, const AnnealReport& report = {});

// The memory pass on every rank, after the latency searches (opt.memory_pass off in
// them): its candidates are the given searches' results at the lowest makespan among
// them, ordered by their peak memory; rank r lowers the (r mod n)-th, starting from its
// own schedule where that is as fast as the winner's and from the winner's otherwise,
// so the ranks lower different schedules. The pass runs for `seconds` (0: for
// memory_pass_iterations(opt, 0) neighbours, and the result is a function of the
// inputs, the seed and the rank count). The shortest result, then the lowest peak
// (ties: the lower rank), ends up on every rank. With `seconds`, a rank whose result is
// at `bound` (the makespan's lower bound) and at opt.mem_target calls the others, which
// end their passes at once. Collective over world.
struct MemoryPhaseResult {
  Order order;
  double makespan = 0;
  double peak_memory = 0;
  std::uint64_t iterations = 0;  // over all ranks and candidates
  double seconds = 0;            // the slowest rank's
  int winner = 0;                // the rank it came from
  int candidate = 0;             // the index (into `searches`) of the search it came from
  std::uint64_t passes = 0;           // memory passes, over all ranks
  std::uint64_t devices_lowered = 0;  // devices made again with a lower peak, over all ranks
  std::uint64_t exact_nodes = 0;      // nodes of the exact search (sched/exact.hpp), over all ranks
  std::uint64_t exact_levels = 0;     // levels it took the peak down, over all ranks
};
MemoryPhaseResult parallel_lower_memory(comm::Communicator& world, const Problem& p,
                                        const std::vector<const SearchResult*>& searches, double bound,
                                        const AnnealOptions& opt, double seconds);

}  // namespace braid::sched
