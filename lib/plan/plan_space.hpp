// The space of execution plans (a mesh and strategy per call) and the cost of
// one plan: call times from the cost model, weight redistribution, the
// workflow simulation serial and with stage fusion, and per-device memory
// (static + peak active, ReaL §5.1) with the OOM check.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "plan/cost_model.hpp"
#include "plan/fusion.hpp"
#include "plan/simulate.hpp"

namespace braid::plan {

struct Entry {
  Strategy strategy;
  CallEstimate estimate;
};

// One choice per call: a mesh (index into PlanSpace::meshes) and an entry of
// that mesh's size (index into PlanSpace::entries(call, mesh)).
struct Choice {
  int mesh = 0;
  int entry = 0;
  bool operator==(const Choice& o) const = default;
};
using Plan = std::vector<Choice>;

struct FusionSettings {
  bool inter = true;
  bool intra = true;
  std::optional<KnownSchedule> schedule;  // from --schedule
};

struct Breakdown {
  double generation = 0, inference = 0, training = 0, other = 0;
};

struct Evaluation {
  double cost = 0;    // what the search minimises: time, x oom_penalty when out of memory
  double time = 0;    // fused when fusion is on, else serial
  double serial = 0;  // iteration time without stage fusion
  double fused = 0;   // iteration time with the fusion that pays
  bool oom = false;
  double peak_memory = 0;  // bytes on the fullest device
  int peak_device = 0;
  InterFusion inter;
  IntraFusion intra;
  Breakdown serial_breakdown, fused_breakdown;
  std::vector<double> call_time;               // each call alone, data transfer included
  std::vector<double> call_start, call_end;    // in the chosen (fused or serial) timeline
  std::vector<double> realloc;                 // weight redistribution before each call
};

// A strategy the user fixes for some calls (braid-meshplan --fix NAME=dDtTpP[xM]): NAME is
// a call (actor_train), a kind (generate, inference, train) or "all"; the micro-batch
// count is free when not given. Only meshes and strategies that match stay in the space.
struct Pin {
  std::string calls;
  int dp = 1, tp = 1, pp = 1;
  int micro = 0;  // 0: any
  bool matches(const Call& c) const;
  bool matches(const Strategy& s) const;
};
// "actor_train=d1t2p1", "train=d2t1p1x4"; UsageError naming the text otherwise.
Pin parse_pin(const std::string& text);

class PlanSpace {
 public:
  // UsageError when a pin names no call of the experiment or leaves a call no option.
  PlanSpace(const CostModel& cm, FusionSettings fusion, const std::vector<Pin>& pins = {});

  const CostModel& cost_model() const { return cm_; }
  const std::vector<Call>& calls() const { return calls_; }
  const std::vector<Mesh>& meshes() const { return meshes_; }
  const std::vector<Entry>& entries(int call, int mesh) const;
  // Every (mesh, entry) of a call.
  const std::vector<Choice>& options(int call) const { return options_[static_cast<std::size_t>(call)]; }
  double plan_count() const;  // the product of the options' counts
  int mesh_index(const Mesh& m) const;  // -1 if not allowed
  const std::vector<int>& meshes_of_size(int devices) const;
  int call_index(const std::string& name) const;  // -1 if absent
  const FusionSettings& fusion() const { return fusion_; }

  Evaluation evaluate(const Plan& plan) const;
  static constexpr double kOomPenalty = 100.0;

 private:
  const std::vector<GenTail>& tails(const Plan& plan, double kv_room) const;

  const CostModel& cm_;
  FusionSettings fusion_;
  std::vector<Call> calls_;
  std::vector<Mesh> meshes_;
  std::vector<int> shape_of_mesh_;             // mesh -> shape index
  std::vector<int> shape_devices_;             // shape -> devices
  std::vector<std::vector<int>> meshes_of_shape_;
  std::vector<std::vector<std::vector<Entry>>> entries_;  // call -> shape -> entries
  std::vector<std::vector<Choice>> options_;
  std::vector<std::vector<int>> parents_;      // dataflow parents per call
  mutable std::unordered_map<long long, std::vector<GenTail>> tails_cache_;
  mutable std::unordered_map<long long, IntraFusion> intra_cache_;
};

}  // namespace braid::plan
