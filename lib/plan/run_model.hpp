// A whole iteration as the processes that run it: each process a lane of tasks (start-up,
// loading, the passes shard by shard, writing), tasks of different lanes waiting on each
// other where data flows (braid-score scores a shard once braid-generate wrote it), all on
// a machine of `cores` CPUs shared by every runnable thread (processor sharing: N runnable
// threads on C cores each run at min(1, C / N) of a core). The driver builds the tasks
// of each way to run an iteration (fused or serial; lib/driver/prediction.hpp) from the
// cost model's passes and the profile's host costs; this file knows no tool.
//
//   std::vector<Task> t;
//   const int gen = add(t, {.name = "generate", .lane = 0, .work = 1.2, .threads = 2});
//   add(t, {.name = "score shard 0", .lane = 1, .work = 0.1, .after = {gen}});
//   const Timeline tl = simulate_shared(t, 2);   // tl.end[i], tl.makespan
#pragma once

#include <string>
#include <vector>

#include "plan/cost_model.hpp"

namespace braid::plan {

struct Task {
  std::string name;
  int lane = 0;            // a lane's tasks run one after another, in the order given
  double work = 0;         // seconds each of its threads needs on a core of its own
  int threads = 1;         // threads runnable while it runs (0: a wait that uses no CPU,
                           // e.g. a process start-up measured as wall time)
  std::vector<int> after;  // tasks (earlier in the list) that must end before it starts
};

struct Timeline {
  std::vector<double> start, end;
  double makespan = 0;
  // Seconds of wall time per second of work over the tasks that ran with threads > 0:
  // the slowdown the shared cores caused.
  double stretch(const std::vector<Task>& tasks, const std::vector<int>& which) const;
};

// Appends a task, returns its index.
int add(std::vector<Task>& tasks, Task t);

// Runs the tasks on `cores` CPUs (0: as many as there are threads, no sharing).
// std::invalid_argument for a task waiting on a later task or itself.
Timeline simulate_shared(const std::vector<Task>& tasks, int cores);

// Generation's shards: when each is complete, as the decode step (response tokens so far)
// at which its last sample ends. A replica generating `per_replica` samples in shards of
// `shard_size` with at most `max_batch` decoding at once: when they all fit, a shard ends
// with its longest sample (order statistics of the maxima of shard_size draws from the
// response lengths, ascending); otherwise samples queue and shards end one after another,
// evenly over the call. Returns the fraction of the call's decode steps, ascending, one per
// shard of the replica.
std::vector<double> shard_end_fractions(const std::vector<int>& response_lengths, int per_replica, int shard_size,
                                        int max_batch);

// The time since the call began at which a generation (GenTimeline) reaches `fraction`
// of its decode steps.
double time_at_fraction(const GenTimeline& g, double fraction);

}  // namespace braid::plan
