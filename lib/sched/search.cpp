#include "sched/search.hpp"

#include <mpi.h>

#include <algorithm>

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
  AnnealResult mine = anneal(p, start, bound, opt, rank == 0 ? report : AnnealReport{});

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
  int reached = mine.stats.reached_bound ? 1 : 0, any = 0;
  MPI_Allreduce(&reached, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  out.any_reached_bound = any != 0;

  out.winner = winner;
  out.best = std::move(mine);
  MPI_Bcast(out.best.order.data(), static_cast<int>(out.best.order.size()), MPI_INT32_T, winner, MPI_COMM_WORLD);
  out.best.makespan = all[3 * static_cast<std::size_t>(winner)];
  out.best.peak_memory = all[3 * static_cast<std::size_t>(winner) + 1];
  return out;
}

}  // namespace braid::sched
