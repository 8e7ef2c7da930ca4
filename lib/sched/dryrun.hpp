// Executes instruction streams the way a runtime would, with blocking RECV and
// buffer-bounded SEND (lower.hpp), compute taking its subtask's duration and a
// tensor arriving p2p_time after it is sent. Proves a schedule deadlock-free
// and consistent with its predicted makespan before any device time is spent;
// where it is not, shows a step x device grid of where every device stands.
#pragma once

#include <string>
#include <vector>

#include "sched/lower.hpp"
#include "sched/problem.hpp"

namespace braid::sched {

struct DryRun {
  bool ok = false;          // every stream ran to its end, every tensor consumed
  double makespan = 0;      // the last device's finish time
  std::vector<double> device_end;
  std::string problem;      // what went wrong (deadlock, wrong tensor, ...)
  std::string grid;         // step x device around where devices stopped (on failure)
};

DryRun dry_run(const Problem& p, const Lowered& lowered);

}  // namespace braid::sched
