// A picture of a schedule like RLHFuse Figure 10: one timeline row per device
// (forward light, backward dark, one colour per model, micro-batch numbers),
// and beneath it the activation memory over time (the highest device at each
// moment) against a dotted line at serial 1F1B's peak.
#pragma once

#include <string>

#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

std::string schedule_svg(const Problem& p, const Order& order, const Timing& timing, double serial_peak);

}  // namespace braid::sched
