#include "sched/search.hpp"

#include <algorithm>
#include <vector>

namespace braid::sched {

SearchResult parallel_search(comm::Communicator& world, const Problem& p, const Order& start, double bound,
                             AnnealOptions opt, const AnnealReport& report) {
  const int rank = world.rank(), size = world.size();
  opt.stream = static_cast<std::uint64_t>(rank);
  SearchResult out;
  out.ranks = size;

  // The first rank at the bound tells the others, who stop their latency search rather
  // than anneal on until the time limit. Every rank sends every other exactly one note:
  // 1 the moment it reaches the bound, else 0 when its search ends; so every receive
  // posted here completes, and none is left in flight when the search returns.
  constexpr int kTag = 7301;
  const auto peers = static_cast<std::size_t>(size);
  std::vector<std::int64_t> note_in(peers, 0);
  const std::int64_t at_bound = 1, not_at_bound = 0;
  std::vector<comm::Request> incoming(peers), outgoing;
  outgoing.reserve(peers);
  auto tell_everyone = [&](const std::int64_t& note) {
    for (int r = 0; r < size; ++r) {
      if (r != rank) outgoing.push_back(world.isend(std::span<const std::int64_t>(&note, 1), r, kTag));
    }
  };
  if (size > 1) {
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (r != rank) incoming[i] = world.irecv(std::span<std::int64_t>(&note_in[i], 1), r, kTag);
    }
    opt.peer_reached_bound = [&] {
      for (std::size_t i = 0; i < peers; ++i) {
        if (incoming[i].test() && note_in[i] == at_bound) return true;  // test(): true once arrived
      }
      return false;
    };
    opt.on_reached_bound = [&] { tell_everyone(at_bound); };
  }
  AnnealResult mine = anneal(p, start, bound, opt, rank == 0 ? report : AnnealReport{});
  if (size > 1) {
    if (outgoing.empty()) tell_everyone(not_at_bound);
    comm::wait_all(incoming);
    comm::wait_all(outgoing);
  }

  // Everyone learns everyone's (makespan, peak) and picks the same winner.
  const double key[3] = {mine.makespan, mine.peak_memory, mine.stats.seconds};
  const std::vector<double> all = world.all_gather(std::span<const double>(key));
  int winner = 0;
  for (int r = 1; r < size; ++r) {
    const double* a = &all[3 * static_cast<std::size_t>(r)];
    const double* w = &all[3 * static_cast<std::size_t>(winner)];
    const bool better = same_time(a[0], w[0]) ? a[1] < w[1] && !same_time(a[1], w[1]) : a[0] < w[0];
    if (better) winner = r;
  }
  for (int r = 0; r < size; ++r) out.seconds = std::max(out.seconds, all[3 * static_cast<std::size_t>(r) + 2]);
  std::int64_t counts[3] = {static_cast<std::int64_t>(mine.stats.iterations), mine.stats.reached_bound ? 1 : 0,
                            mine.stats.stopped_by_peer ? 1 : 0};
  world.all_reduce_sum(std::span<std::int64_t>(counts));
  out.total_iterations = static_cast<std::uint64_t>(counts[0]);
  out.ranks_at_bound = static_cast<int>(counts[1]);
  out.ranks_stopped = static_cast<int>(counts[2]);
  out.any_reached_bound = counts[1] > 0;

  out.winner = winner;
  out.best = std::move(mine);
  world.broadcast(std::span<std::int32_t>(out.best.order), winner);
  out.best.makespan = all[3 * static_cast<std::size_t>(winner)];
  out.best.peak_memory = all[3 * static_cast<std::size_t>(winner) + 1];
  return out;
}

}  // namespace braid::sched
