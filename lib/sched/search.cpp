#include "sched/search.hpp"

#include <mpi.h>

#include <algorithm>
#include <vector>

namespace braid::sched {

MpiSession::MpiSession(int* argc, char*** argv) {
  int up = 0;
  MPI_Initialized(&up);
  if (!up) {
    MPI_Init(argc, argv);
    owner_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  int down = 0;
  MPI_Finalized(&down);
  if (owner_ && !down) MPI_Finalize();
}

SearchResult parallel_search(const Problem& p, const Order& start, double bound, AnnealOptions opt,
                             const AnnealReport& report) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  opt.stream = static_cast<std::uint64_t>(rank);
  SearchResult out;
  out.ranks = size;

  // The first rank at the bound tells the others, who stop their latency search
  // rather than anneal on until the time limit. Every rank keeps one receive posted;
  // after the search each receives exactly the notes sent to it, so none is left over.
  constexpr int kTag = 7301;
  int note_in = 0, note_out = 1;
  MPI_Request incoming = MPI_REQUEST_NULL;
  std::vector<MPI_Request> outgoing;
  outgoing.reserve(static_cast<std::size_t>(size));
  if (size > 1) {
    MPI_Irecv(&note_in, 1, MPI_INT, MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &incoming);
    opt.peer_reached_bound = [&incoming] {
      int arrived = 0;
      if (incoming != MPI_REQUEST_NULL) MPI_Request_get_status(incoming, &arrived, MPI_STATUS_IGNORE);
      return arrived != 0;
    };
    opt.on_reached_bound = [&] {
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        outgoing.emplace_back();
        MPI_Isend(&note_out, 1, MPI_INT, r, kTag, MPI_COMM_WORLD, &outgoing.back());
      }
    };
  }
  AnnealResult mine = anneal(p, start, bound, opt, rank == 0 ? report : AnnealReport{});
  if (size > 1) {
    int sent = outgoing.empty() ? 0 : 1, senders = 0;
    MPI_Allreduce(&sent, &senders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int expected = senders - sent;
    if (expected > 0) {
      MPI_Wait(&incoming, MPI_STATUS_IGNORE);
      for (--expected; expected > 0; --expected) {
        MPI_Recv(&note_in, 1, MPI_INT, MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else {
      MPI_Cancel(&incoming);
      MPI_Wait(&incoming, MPI_STATUS_IGNORE);
    }
    MPI_Waitall(static_cast<int>(outgoing.size()), outgoing.data(), MPI_STATUSES_IGNORE);
  }

  // Everyone learns everyone's (makespan, peak) and picks the same winner.
  const double key[3] = {mine.makespan, mine.peak_memory, mine.stats.seconds};
  std::vector<double> all(3 * static_cast<std::size_t>(size));
  MPI_Allgather(key, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, MPI_COMM_WORLD);
  int winner = 0;
  for (int r = 1; r < size; ++r) {
    const double* a = &all[3 * static_cast<std::size_t>(r)];
    const double* w = &all[3 * static_cast<std::size_t>(winner)];
    const bool better = same_time(a[0], w[0]) ? a[1] < w[1] && !same_time(a[1], w[1]) : a[0] < w[0];
    if (better) winner = r;
  }
  for (int r = 0; r < size; ++r) out.seconds = std::max(out.seconds, all[3 * static_cast<std::size_t>(r) + 2]);
  unsigned long long iters = mine.stats.iterations, total = 0;
  MPI_Allreduce(&iters, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  out.total_iterations = total;
  int flags[2] = {mine.stats.reached_bound ? 1 : 0, mine.stats.stopped_by_peer ? 1 : 0}, counts[2] = {0, 0};
  MPI_Allreduce(flags, counts, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  out.ranks_at_bound = counts[0];
  out.ranks_stopped = counts[1];
  out.any_reached_bound = counts[0] > 0;

  out.winner = winner;
  out.best = std::move(mine);
  MPI_Bcast(out.best.order.data(), static_cast<int>(out.best.order.size()), MPI_INT32_T, winner, MPI_COMM_WORLD);
  out.best.makespan = all[3 * static_cast<std::size_t>(winner)];
  out.best.peak_memory = all[3 * static_cast<std::size_t>(winner) + 1];
  return out;
}

}  // namespace braid::sched
