// A schedule is, per device, the order in which it runs its subtasks. Times
// follow from the order: a subtask starts when its device is free and its
// input has arrived (RLHFuse Algorithm 3). evaluate() computes them from
// scratch in a topological pass; the annealer keeps them up to date
// incrementally and the tests hold the two against each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/problem.hpp"

namespace braid::sched {

// order[d * per_device + i] = the i-th subtask device d runs.
using Order = std::vector<std::int32_t>;

struct Timing {
  bool valid = false;
  std::string problem;   // why not valid (a cycle, a task on the wrong device, ...)
  std::vector<double> start, end;
  std::vector<double> device_peak;  // peak activation memory per device
  double makespan = 0;
  double peak_memory = 0;           // max over devices
};

Timing evaluate(const Problem& p, const Order& order);

// Peak activation memory of each device: memory is taken at the start of an F
// and given back at the end of its B, and a device runs one subtask at a time,
// so the peak depends on the order alone, not on the times.
std::vector<double> device_peaks(const Problem& p, const Order& order);

// Relative tolerance for "equal" times (the bound is reached, makespans tie).
bool same_time(double a, double b);
// a below b, or the same time.
bool at_most(double a, double b);

}  // namespace braid::sched
