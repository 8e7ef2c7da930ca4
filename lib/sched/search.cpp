#include "sched/search.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <vector>

#include "core/log.hpp"
#include "sched/exact.hpp"
#include "sched/resequence.hpp"

namespace braid::sched {

namespace {

// The tags of a rank's calls to its peers; the searches' other traffic is collectives.
constexpr int kMeetingCallTag = 7331;   // parallel_search: come to the meeting now
constexpr int kMemoryDoneTag = 7332;    // parallel_lower_memory: my schedule cannot be beaten

// A rank's call to the others (one byte to each) and its hearing of theirs, for a phase
// whose ranks work apart between collectives. Every rank calls exactly once (call(), or
// at the latest finish()), and finish() receives every peer's call, so that no message
// outlives the phase. Off (one rank, or not wanted): nothing is sent, heard() is false.
class PeerCall {
 public:
  PeerCall(comm::Communicator& world, int tag, bool on)
      : world_(world), tag_(tag), on_(on && world.size() > 1), heard_(static_cast<std::size_t>(world.size()), 0) {
    if (!on_) return;
    for (int r = 0; r < world.size(); ++r) {
      if (r != world.rank()) hearing_.push_back(world.irecv(std::span<std::uint8_t>(&heard_[static_cast<std::size_t>(r)], 1), r, tag));
    }
  }
  void call() {
    if (!on_ || called_) return;
    called_ = true;
    for (int r = 0; r < world_.size(); ++r) {
      if (r != world_.rank()) calling_.push_back(world_.isend(std::span<const std::uint8_t>(&byte_, 1), r, tag_));
    }
  }
  // Whether a peer has called (it stays so).
  bool heard() {
    for (comm::Request& h : hearing_) any_ = (h.active() && h.test()) || any_;
    return any_;
  }
  void finish() {
    if (!on_) return;
    call();
    comm::wait_all(hearing_);
    comm::wait_all(calling_);
  }

 private:
  comm::Communicator& world_;
  int tag_;
  bool on_;
  std::vector<std::uint8_t> heard_;
  const std::uint8_t byte_ = 1;
  std::vector<comm::Request> hearing_, calling_;
  bool called_ = false, any_ = false;
};

// (makespan, tie-break, rank): the order in which ranks' schedules compare.
bool better_than(double mk_a, double tie_a, double mk_b, double tie_b) {
  if (!same_time(mk_a, mk_b)) return mk_a < mk_b;
  return tie_a < tie_b && !same_time(tie_a, tie_b);
}

}  // namespace

SearchResult parallel_search(comm::Communicator& world, const Problem& p, const Order& start, double bound,
                             AnnealOptions opt, const AnnealReport& report) {
  const int rank = world.rank(), size = world.size();
  opt.stream = static_cast<std::uint64_t>(rank);
  SearchResult out;
  out.ranks = size;

  // Ranks meet every opt.sync_every valid neighbours (and at once when one wants to
  // stop): an all-gather of every rank's best (makespan, tie-break) and flags. All
  // stop together after a meeting where one has reached the bound or spent its
  // budget, so no rank anneals on after another has the answer. When sharing is on,
  // the best schedule of all is broadcast from its rank, and every rank behind it
  // restarts from it at its next reheat: ranks exchange states, not only the final
  // best. The meetings happen at iteration counts, so with an iteration budget the
  // result depends on the spec, the seed and the number of ranks only.
  Order shared(start.size());
  Order* adopt_buffer = &shared;
  // Meeting by the clock, a rank that wants to stop (at the bound, out of time) calls
  // the others to the meeting at once, one byte to each, so that none waits up to
  // sync_seconds for a peer's next meeting; the ranks check for a call with the clock
  // (every few thousand neighbours). Every rank calls exactly once: at the meeting that
  // stops, or after it, so every receive is matched before the search returns.
  PeerCall meeting(world, kMeetingCallTag, meets_by_clock(opt));
  if (size > 1) {
    opt.meeting_called = [&] { return meeting.heard(); };
    opt.sync = [&, adopt_buffer](const SyncState& s, const Order& best) -> SyncReply {
      if (s.wants_stop) meeting.call();
      const double mine[4] = {s.best_makespan, s.best_tie, s.reached_bound ? 1.0 : 0.0, s.wants_stop ? 1.0 : 0.0};
      const std::vector<double> all = world.all_gather(std::span<const double>(mine));
      SyncReply reply;
      int leader = 0;
      for (int r = 0; r < size; ++r) {
        const double* a = &all[4 * static_cast<std::size_t>(r)];
        if (a[2] != 0) reply.peer_reached_bound = reply.peer_reached_bound || r != rank;
        if (a[2] != 0 || a[3] != 0) reply.stop = true;
        const double* l = &all[4 * static_cast<std::size_t>(leader)];
        if (better_than(a[0], a[1], l[0], l[1])) leader = r;
      }
      if (reply.stop || !opt.share_best) return reply;
      // Does anyone stand behind the leader? Then the leader's schedule goes round.
      const double* l = &all[4 * static_cast<std::size_t>(leader)];
      bool anyone_behind = false;
      for (int r = 0; r < size; ++r) {
        const double* a = &all[4 * static_cast<std::size_t>(r)];
        anyone_behind = anyone_behind || better_than(l[0], l[1], a[0], a[1]);
      }
      if (!anyone_behind) return reply;
      if (rank == leader) std::copy(best.begin(), best.end(), adopt_buffer->begin());
      world.broadcast(std::span<std::int32_t>(*adopt_buffer), leader);
      if (rank != leader && better_than(l[0], l[1], mine[0], mine[1])) {
        reply.adopt = adopt_buffer;
        reply.adopt_makespan = l[0];
        reply.adopt_tie = l[1];
      }
      return reply;
    };
  }
  AnnealResult mine = anneal(p, start, bound, opt, rank == 0 ? report : AnnealReport{});
  meeting.finish();

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
  std::int64_t counts[4] = {static_cast<std::int64_t>(mine.stats.iterations), mine.stats.reached_bound ? 1 : 0,
                            mine.stats.stopped_by_peer ? 1 : 0, static_cast<std::int64_t>(mine.stats.adopted)};
  world.all_reduce_sum(std::span<std::int64_t>(counts));
  out.total_iterations = static_cast<std::uint64_t>(counts[0]);
  out.ranks_at_bound = static_cast<int>(counts[1]);
  out.ranks_stopped = static_cast<int>(counts[2]);
  out.adopted = static_cast<std::uint64_t>(counts[3]);
  out.any_reached_bound = counts[1] > 0;

  out.winner = winner;
  out.own_best = mine.order;
  out.own_makespan = mine.makespan;
  out.best = std::move(mine);
  world.broadcast(std::span<std::int32_t>(out.best.order), winner);
  out.best.makespan = all[3 * static_cast<std::size_t>(winner)];
  out.best.peak_memory = all[3 * static_cast<std::size_t>(winner) + 1];
  return out;
}

MemoryPhaseResult parallel_lower_memory(comm::Communicator& world, const Problem& p,
                                        const std::vector<const SearchResult*>& searches, double bound,
                                        const AnnealOptions& opt, double seconds) {
  const int rank = world.rank(), size = world.size();
  double fastest = std::numeric_limits<double>::infinity();
  for (const SearchResult* s : searches) fastest = std::min(fastest, s->best.makespan);
  std::vector<int> chosen;
  for (int k = 0; k < static_cast<int>(searches.size()); ++k) {
    if (same_time(searches[static_cast<std::size_t>(k)]->best.makespan, fastest)) chosen.push_back(k);
  }
  // Splitting one rank's pass between candidates halves each one's descent, which
  // costs more than the choice gains (docs/notes/schedgen-memory-pass.md): the candidate that holds the
  // fewest activations already goes first, and rank r lowers the r-th (round robin).
  std::stable_sort(chosen.begin(), chosen.end(), [&](int a, int b) {
    return searches[static_cast<std::size_t>(a)]->best.peak_memory < searches[static_cast<std::size_t>(b)]->best.peak_memory;
  });
  auto start_of = [&](int k) -> const Order& {
    const SearchResult& s = *searches[static_cast<std::size_t>(k)];
    return same_time(s.own_makespan, s.best.makespan) ? s.own_best : s.best.order;
  };
  MemoryPhaseResult out;
  const auto began = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(); };
  // A pass that stalls (its best stopped moving) leaves budget: the next pass is a
  // polish, opt.mem_polish neighbours from its result, colder (kMemPolishCold), and the
  // one after it starts from the next candidate (round robin, from the rank's own),
  // each on another random stream, until the budget is spent; the best of the passes
  // is kept (on small problems the first pass's basin is often not the lowest one; on
  // large ones the first pass uses the whole budget). Every pass's result has its
  // devices made again exactly (resequence_devices) while time is left.
  const std::uint64_t budget = memory_pass_iterations(opt, seconds);
  // Under a time limit, a rank whose schedule is at the bound and at the target peak
  // (nothing beats it) tells the others, which end their passes at the next look at
  // the clock instead of running out their time for nothing.
  PeerCall done(world, kMemoryDoneTag, seconds > 0);
  const std::function<bool()> peer_done = [&] { return done.heard(); };
  Timing t;
  int mine_candidate = chosen.front();
  Order last;  // the last pass's result, which a polish starts from
  int last_candidate = mine_candidate;
  std::uint64_t from_candidates = 0;
  ResequenceOptions reseq;
  reseq.stop = [&] { return (seconds > 0 && elapsed_s() >= seconds) || peer_done(); };
  // On small grids the exact search comes last, with a share of a clocked phase.
  const bool exact = opt.mem_exact_nodes > 0 && exact_applies(p);
  const double reserve =
      (opt.mem_resequence ? resequence_reserve(p, seconds) : 0.0) + (exact ? kExactShare * seconds : 0.0);
  for (std::uint64_t round = 0;; ++round) {
    const std::uint64_t left = budget == std::numeric_limits<std::uint64_t>::max() ? budget : budget - out.iterations;
    const double time_left = seconds > 0 ? std::max(seconds - reserve - elapsed_s(), 0.01 * seconds) : 0.0;
    AnnealStats st;
    const bool polish = opt.mem_polish > 0 && round % 2 == 1;
    int k = last_candidate;  // a polish goes on from the last pass, whose candidate it keeps
    if (!polish) k = chosen[(static_cast<std::size_t>(rank) + from_candidates++) % chosen.size()];
    Order order = lower_memory(p, polish ? last : start_of(k), polish ? std::min(left, opt.mem_polish) : left, time_left,
                               opt.mem_target, opt.seed, static_cast<std::uint64_t>(rank) + 0x5eed + 0x100000 * round, &st,
                               polish ? opt.mem_t0_factor * kMemPolishCold : opt.mem_t0_factor, opt.mem_chain_moves,
                               opt.mem_level_margin, peer_done);
    out.iterations += st.mem_iterations;
    ++out.passes;
    if (opt.mem_resequence) {
      const ResequenceStats rs = resequence_devices(p, order, reseq);
      out.devices_lowered += static_cast<std::uint64_t>(rs.lowered);
      log::debug("  devices made again: {} tried, {} kept, {} lower, {} refused by their timing, {} skipped", rs.tried,
                 rs.kept, rs.lowered, rs.refused, rs.skipped);
    }
    const Timing now = evaluate(p, order);
    log::debug("memory pass {} of rank {}: {} {} (peak {:.6g}) -> peak {:.6g}, makespan {:.6g}, {} neighbours, {:.2f} s{}",
               round, rank, polish ? "polish of the last pass, from candidate" : "candidate", k,
               searches[static_cast<std::size_t>(k)]->best.peak_memory, now.peak_memory, now.makespan, st.mem_iterations,
               st.mem_seconds, st.mem_stalled ? ", stalled" : "");
    last = order;
    last_candidate = k;
    const bool better = round == 0 || (same_time(now.makespan, t.makespan)
                                           ? now.peak_memory < t.peak_memory && !same_time(now.peak_memory, t.peak_memory)
                                           : now.makespan < t.makespan);
    if (better) {
      out.order = std::move(order);
      t = now;
      mine_candidate = k;
    }
    const bool budget_left = seconds > 0 ? seconds - reserve - elapsed_s() > 0.05 * seconds
                                         : budget - out.iterations > std::max<std::uint64_t>(budget / 20, 1'000'000);
    if (at_most(t.makespan, bound) && at_most(t.peak_memory, opt.mem_target)) done.call();
    // A pass from a candidate that did not stall had the whole budget; a polish ends
    // by its own budget.
    if (!(st.mem_stalled || polish) || !budget_left || at_most(t.peak_memory, opt.mem_target) || done.heard()) break;
  }
  if (exact && !(at_most(t.peak_memory, opt.mem_target) && opt.mem_target > 0)) {
    ExactOptions ex;
    ex.nodes = seconds > 0 ? 0 : opt.mem_exact_nodes;  // under a clock, its share of the time
    ex.seed = opt.seed * 0x100 + static_cast<std::uint64_t>(rank);
    // Rank r's sweeps start at the r-th perturbation: the unperturbed sweep once, not
    // once a rank.
    ex.first_descent = static_cast<std::uint64_t>(rank);
    ex.stop = reseq.stop;
    const ExactStats es = lower_peak_exactly(p, out.order, opt.mem_target, ex);
    out.exact_nodes += es.nodes;
    out.exact_levels += static_cast<std::uint64_t>(es.levels_found);
    log::debug("exact search of rank {}: {} levels tried, {} found, {} nodes", rank, es.levels_tried, es.levels_found,
               es.nodes);
    if (es.levels_found > 0) t = evaluate(p, out.order);
  }
  done.finish();
  const double mine_peak = t.peak_memory;
  const double elapsed = elapsed_s();

  // Every rank learns every rank's (makespan, peak, candidate, seconds) and picks the
  // same winner: the pass may also have shortened a schedule (it accepts any makespan
  // up to its start's), so the makespan still comes first.
  const double key[4] = {t.makespan, mine_peak, static_cast<double>(mine_candidate), elapsed};
  const std::vector<double> all = world.all_gather(std::span<const double>(key));
  auto at = [&](int r, int i) { return all[4 * static_cast<std::size_t>(r) + static_cast<std::size_t>(i)]; };
  int winner = 0;
  for (int r = 1; r < size; ++r) {
    const bool better = same_time(at(r, 0), at(winner, 0)) ? at(r, 1) < at(winner, 1) && !same_time(at(r, 1), at(winner, 1))
                                                           : at(r, 0) < at(winner, 0);
    if (better) winner = r;
  }
  for (int r = 0; r < size; ++r) out.seconds = std::max(out.seconds, at(r, 3));
  std::int64_t sums[5] = {static_cast<std::int64_t>(out.iterations), static_cast<std::int64_t>(out.passes),
                          static_cast<std::int64_t>(out.devices_lowered), static_cast<std::int64_t>(out.exact_nodes),
                          static_cast<std::int64_t>(out.exact_levels)};
  world.all_reduce_sum(std::span<std::int64_t>(sums));
  out.iterations = static_cast<std::uint64_t>(sums[0]);
  out.passes = static_cast<std::uint64_t>(sums[1]);
  out.devices_lowered = static_cast<std::uint64_t>(sums[2]);
  out.exact_nodes = static_cast<std::uint64_t>(sums[3]);
  out.exact_levels = static_cast<std::uint64_t>(sums[4]);
  out.winner = winner;
  out.candidate = static_cast<int>(at(winner, 2));
  out.makespan = at(winner, 0);
  out.peak_memory = at(winner, 1);
  out.order.resize(searches.front()->best.order.size());
  world.broadcast(std::span<std::int32_t>(out.order), winner);
  return out;
}

}  // namespace braid::sched
