// Lower bounds on the makespan of any valid schedule (RLHFuse §7.3, extended).
#pragma once

#include <string>

#include "sched/problem.hpp"

namespace braid::sched {

struct LowerBound {
  double value = 0;          // the largest of the three below
  double per_device = 0;     // max over devices and model subsets: earliest arrival + work + shortest tail
  double critical_path = 0;  // one micro-batch through every F and B of a model
  double average_work = 0;   // all work / devices
  std::string binding;       // which one gives `value`
};

LowerBound lower_bound(const Problem& p);

}  // namespace braid::sched
