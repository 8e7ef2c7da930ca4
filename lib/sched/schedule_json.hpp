// The braid.schedule document: what the training runtime executes (per device
// the ordered subtasks and the lowered instruction stream with peers and buffer
// ids) and what the search found (makespan, bound, peak memory, baselines).
// The spec it was made for travels inside, so the file checks itself.
#pragma once

#include <string>

#include "core/json.hpp"
#include "sched/lower.hpp"
#include "sched/problem.hpp"
#include "sched/schedule.hpp"

namespace braid::sched {

constexpr int kScheduleVersion = 1;

struct ScheduleSummary {
  double lower_bound = 0;
  std::string lower_bound_binding;
  double serial_makespan = 0, serial_peak = 0;
  double greedy_makespan = 0, greedy_peak = 0;
  ordered_json search;  // how it was found (ranks, iterations, seconds, options)
};

// The figures of a schedule that follow from its problem alone: the lower bound (and which
// bound binds), serial 1F1B, and greedy fusion (1F1B model after model where greedy gets
// stuck under mem_capacity, as braid-schedgen then starts from); an empty search record.
ScheduleSummary reference_summary(const Problem& p);

ordered_json spec_to_json(const SchedSpec& spec);

ordered_json schedule_to_json(const Problem& p, const Order& order, const Timing& timing, const Lowered& lowered,
                              const ScheduleSummary& summary);

// Reads back a braid.schedule file, every field checked: the spec (every key, as written),
// per device its subtasks (each of the device's subtasks of the spec once, in the order its
// instructions compute them, with the start and end that order gives), instructions and
// buffers, the peaks and the makespan the order gives, the lower bound and baselines the spec
// gives, and the search record (optional keys, each of its type and bounds; the ones the spec
// or the order fix, checked against them). Every problem at once, naming `origin` and the
// field (`devices[0].subtasks[3].end`, `search.seed`); exit 2 through InputError.
struct LoadedSchedule {
  Problem problem;
  Lowered lowered;
  double makespan = 0;
};
LoadedSchedule load_schedule(const json& doc, const std::string& origin);

// `groups` identical copies of a schedule side by side: devices and every model's replicas
// times `groups`, group k on devices k·D .. (k+1)·D - 1 running device d's stream with
// its subtasks and peers moved there. braid-schedgen refuses such a spec (its replicas
// share the factor: the search would split it into identical independent problems), so a
// plan whose fused training splits into groups is scheduled once, for one group, and run
// as this: the copies are data parallel, each stage's gradients summed over the
// replicas of every group. Problem::device_of places replica r on devices r·stages.., so
// group k's replicas are k·K .. (k+1)·K - 1 of the widened problem.
LoadedSchedule tile_schedule(const LoadedSchedule& one, int groups);

}  // namespace braid::sched
