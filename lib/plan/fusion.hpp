// Stage fusion as the planner predicts it (RLHFuse §4.2, §5, §7.3).
//
// Inter-stage: once fewer than R_t samples are still generating, they move to
// m generation replicas and the other replicas' devices start the inference
// calls on the finished samples; later samples stream in as they finish. R_t
// is chosen by simulating 5%..95% of the batch; m = max(R_t / BS_max, R_t x
// KV of the longest sample / KV room of a replica).
//
// Intra-stage: actor and critic training on the same devices run as one fused
// bidirectional pipeline; its time per optimizer step is braid-schedgen's lower
// bound of a fused schedule for the emitted schedspec (sched/bound.hpp: per
// device earliest arrival + work + shortest tail, critical paths, total work /
// devices), or a real schedule's makespan (--schedule).
#pragma once

#include <optional>
#include <vector>

#include "core/json.hpp"
#include "plan/cost_model.hpp"

namespace braid::plan {

// One R_t candidate's generation tail, independent of the inference work.
struct GenTail {
  int r_t = 0;
  int m = 0;
  double t_migrate = 0;               // migration done, inference may start
  std::vector<double> time;           // tail timeline points, ascending
  std::vector<int> completed;         // samples finished by time[k]
  double gen_end = 0;
};

struct InterFusion {
  bool used = false;
  int replicas = 0;  // n: generation replicas before migration
  int r_t = 0, m = 0;
  double bs_max = 0;
  double serial = 0;  // generation + inference, one after the other
  double fused = 0;
  double gen_end = 0;  // when the last sample finishes generating
  std::vector<std::pair<int, double>> curve;  // (R_t, fused time) of every candidate (RLHFuse Fig. 9)
};

// Every R_t candidate for a generation option (n replicas).
std::vector<GenTail> gen_tails(const CostModel& cm, const Mesh& mesh, const Strategy& s,
                               double kv_room_per_replica);
// The best candidate for inference work that takes t_inf on the whole
// generation mesh; falls back to serial when no candidate beats it.
InterFusion best_inter_fusion(const std::vector<GenTail>& tails, double gen_serial, double t_inf, int batch,
                              int replicas);

struct IntraFusion {
  bool used = false;
  double serial = 0;         // actor_train + critic_train, one after the other
  double fused = 0;          // the whole training stage, fused
  double per_step_bound = 0;  // per optimizer step: the fused pipeline alone
  int groups = 1;            // independent fused groups (gcd of the pipeline counts)
  std::string source = "lower_bound";
  ordered_json schedspec;    // braid.schedspec for one fused group (times in ms, memory in GB)
};

// A braid.schedule found for some schedspec: its makespan replaces the bound
// for plans whose fused training emits that same spec.
struct KnownSchedule {
  double makespan_ms = 0;
  json spec;
};

// Whether a plan's schedspec is the one a schedule was made for: same devices,
// and per model the same name, replicas, micro-batches and total fwd/bwd time
// (schedgen stores the spec after its tp merge, which keeps the sums).
bool same_schedspec(const json& a, const json& b);

// Actor and critic training on the same mesh. serial = the two calls' times.
IntraFusion intra_fusion(const CostModel& cm, const Mesh& mesh, const Strategy& actor, const Strategy& critic,
                         double serial, double mem_capacity_bytes, const KnownSchedule* schedule);

}  // namespace braid::plan
