// The schedules the annealer starts from and is measured against.
#pragma once

#include <optional>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

// Every model's 1F1B order on each device, model after model: a valid
// low-memory schedule of the whole problem (models may overlap where a device
// finishes one model early).
Order one_f_one_b(const Problem& p);

// The greedy bidirectional fusion of RLHFuse §5.2: whenever a device is free it
// runs a subtask whose input is there, favouring the model with more work per
// stage, backward before forward. Respects mem_capacity; nullopt if that
// leaves every device stuck.
std::optional<Order> greedy(const Problem& p);

struct BaselineResult {
  double makespan = 0;
  double peak_memory = 0;
};

// Serial 1F1B as the paper's Table 3 counts it: each model trained alone with
// 1F1B, one after the other (makespans add, the peak is the largest alone).
BaselineResult serial_1f1b(const SchedSpec& spec);

}  // namespace braid::sched
