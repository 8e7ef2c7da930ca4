// The fused-pipeline scheduling problem in the flat form every pass works on.
//
// A schedspec names models (actor, critic, ...) that each run as `replicas`
// pipelines of `stages` stages over the same `devices`. After the spec is
// checked (and stages merged where tensor-parallel degrees differ, RLHFuse
// §5.2), every device holds exactly one stage of every model, so each device
// runs the same number of subtasks: one forward (F) and one backward (B) per
// micro-batch per model. Subtasks are numbered so that device d owns the
// contiguous range [d*per_device, (d+1)*per_device): the passes index flat
// arrays rather than chase pointers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"

namespace braid::sched {

enum class Kind : std::uint8_t { F = 0, B = 1 };

struct ModelSpec {
  std::string name;
  int stages = 1;          // after any tp merge
  int replicas = 1;        // fusion factor K
  int micro_batches = 1;   // per replica
  int tp = 1;
  bool forward = true;     // stage 0 on the lowest device of its replica
  std::vector<double> fwd, bwd, act_mem;  // one value per stage (after merge)
  int merged_from = 1;     // how many original stages make one stage here
};

// Bounds of a spec's values (docs/formats-schedule.md): a stage's forward or backward time and
// the time between devices at most kMaxTime, a micro-batch's activations on a stage at most
// kMaxActMem, in whatever units the spec uses (braid-meshplan's: ms and GB). Beyond them a value
// is a typo; 1e300 made makespans of 3e300.
constexpr double kMaxTime = 1e9;
constexpr double kMaxActMem = 1e9;

struct SchedSpec {
  int devices = 1;
  std::vector<ModelSpec> models;
  std::optional<double> mem_capacity;  // nullopt: unlimited
  double p2p_time = 0;
  // The spec's "anneal" block as given (checked: knobs of sched/option_schema.hpp), which
  // braid-schedgen's search takes over its preset; the problem itself does not read it.
  json anneal = json::object();
};

// Reads and checks a braid.schedspec document (or the one a braid.plan carries for
// its fused training stage); every problem is reported at once
// through one InputError naming `origin`. Refuses what cannot be scheduled.
SchedSpec parse_schedspec(const std::string& json_text, const std::string& origin);
SchedSpec load_schedspec(const std::string& path);
// The same from a document already parsed; `root` is its path inside `origin` ("spec" in a
// schedule) and `written` reads a spec as braid-schedgen writes it into a schedule: every key
// required (none takes its default), no tp (the spec there is after the tp merge).
SchedSpec schedspec_from_json(const json& doc, const std::string& origin, std::string_view root = "",
                              bool written = false);

struct Problem {
  SchedSpec spec;
  int devices = 0;
  int per_device = 0;   // subtasks per device
  int num_tasks = 0;
  std::vector<int> model_offset;  // start of model m's block inside a device's range

  // Per subtask.
  std::vector<double> dur;
  std::vector<double> mem_delta;   // +act_mem for F (held from its start), -act_mem for B
  std::vector<double> lag;         // p2p_time when the data predecessor is on another device
  std::vector<std::int32_t> pred;  // data predecessor or -1
  std::vector<std::int32_t> succ;  // data successor or -1
  std::vector<std::int32_t> device;
  std::vector<std::int16_t> model, replica, stage;
  std::vector<std::int32_t> micro_batch;
  std::vector<Kind> kind;

  int device_of(int m, int r, int s) const;
  int task_id(int m, int r, int s, int j, Kind k) const;
  // The stage and replica of model m that device d holds.
  int stage_on(int m, int d) const;
  int replica_on(int m, int d) const;
};

Problem build_problem(const SchedSpec& spec);

// A spec holding only model m (same devices), for the per-model baselines.
SchedSpec only_model(const SchedSpec& spec, int m);

}  // namespace braid::sched
