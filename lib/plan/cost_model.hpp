// The time and memory of one model function call under a mesh and strategy,
// from the profile's per-layer tables (interpolated) plus tensor, pipeline and
// data parallel communication (ReaL §5.1). Also weight redistribution between
// two layouts and the decode-step model the inter-stage fusion uses.
#pragma once

#include <string>
#include <vector>

#include "plan/experiment.hpp"
#include "plan/mesh.hpp"
#include "plan/profile.hpp"

namespace braid::plan {

enum class CallKind { generate, inference, train };

struct Call {
  std::string name;  // actor_gen, ref_inf, reward_inf, critic_inf, actor_train, critic_train
  std::string role;  // actor, critic, ref, reward
  CallKind kind;
};

// The calls of one iteration of the experiment's algorithm, in dataflow order.
std::vector<Call> dataflow_calls(const Experiment& e);
const char* kind_name(CallKind k);

struct CallEstimate {
  bool valid = false;
  double time = 0;          // seconds, the whole call in one iteration
  double active_bytes = 0;  // peak per device while the call runs (weights excluded)
  double layout_weights = 0;  // per device: the weights in this layout (largest stage)
  double static_bytes = 0;    // per device: what stays resident across the iteration
};

// The serial generation of one replica, block by block, for inter-stage fusion.
struct GenTimeline {
  double prefill = 0;
  struct Block {
    int step0 = 0;     // first decode step of the block
    int steps = 0;
    int remaining = 0;  // samples of the whole batch still generating at step0
    double start = 0;   // time since the call began
  };
  std::vector<Block> blocks;
  double end = 0;
};

class CostModel {
 public:
  CostModel(const Experiment& e, const Profile& p, const Cluster& c);

  const Experiment& experiment() const { return exp_; }
  const Profile& profile() const { return prof_; }
  const Cluster& cluster() const { return cl_; }
  int per_node() const { return cl_.devices_per_node; }
  double device_memory() const;  // usable bytes per device
  const ModelProfile& model(const std::string& role) const;

  // The most micro-batches a generation or inference call may split its batch into
  // (powers of two up to this; training takes the experiment's micro-batch size or searches up to 64).
  void set_max_micro(int n) { max_micro_ = n; }

  // Strategies worth considering for `call` on a mesh of `devices` devices.
  std::vector<Strategy> strategies(const Call& call, int devices) const;
  CallEstimate estimate(const Call& call, const Mesh& mesh, const Strategy& s) const;

  // Moving a model's weights from one layout to another (0 when identical).
  double realloc_time(const std::string& role, const Mesh& from, const Strategy& sf, const Mesh& to,
                      const Strategy& st) const;

  // Generation details for inter-stage fusion.
  GenTimeline gen_timeline(const Mesh& mesh, const Strategy& s) const;
  double decode_step(const Strategy& s, bool spans, double active_per_replica, double kv_len) const;
  double kv_bytes_per_sample_token(const Strategy& s) const;  // per device of a replica
  double bs_max_per_replica(const Strategy& s) const;

  // Per-stage training times of a model on `tp` devices per stage, for intra-stage fusion;
  // recomputing the layers whose index is a multiple of `recompute` (0: none). Under the
  // experiment's LoRA (train.lora_rank) the base is frozen: half the layer table's backward
  // (no weight gradients) and the adapters alone synchronised and updated.
  struct StageTimes {
    std::vector<double> fwd, bwd, act_bytes;  // per stage, one micro-batch
    double p2p = 0;                           // one activation transfer
    double sync = 0;                          // per optimizer step: gradient all-reduce + update
  };
  StageTimes train_stages(const std::string& role, int stages, int tp, int dp, bool spans,
                          double samples_per_micro, int recompute = 0) const;

  double mean_prompt() const { return mean_prompt_; }
  double mean_total() const { return mean_prompt_ + mean_response_; }
  const std::vector<int>& response_lengths() const { return responses_; }

 private:
  double allreduce(double bytes, int n, bool inter) const;
  double p2p(double bytes, bool inter) const;
  // prefill: the KV-cache path's table (generation), else the packed forward's.
  double layer_unit_fwd(const ModelProfile& m, int tp, double tokens, double seq, bool prefill = false) const;
  double layer_unit_bwd(const ModelProfile& m, int tp, double tokens, double seq) const;
  // Parameters a training call updates per layer: every one, or under LoRA the adapters'.
  double trained_params_per_layer(const ModelProfile& m) const;
  double pipeline_fwd(const ModelProfile& m, const Strategy& s, bool spans, double tokens, double seq, int micro,
                      bool prefill = false) const;
  CallEstimate estimate_train(const Call& call, const Mesh& mesh, const Strategy& s) const;
  CallEstimate estimate_inference(const Call& call, const Mesh& mesh, const Strategy& s) const;
  CallEstimate estimate_generate(const Call& call, const Mesh& mesh, const Strategy& s) const;
  double stage_param_bytes(const ModelProfile& m, int tp, int pp, double per_layer, double per_end) const;

  const Experiment& exp_;
  const Profile& prof_;
  Cluster cl_;
  std::vector<const ModelProfile*> models_;  // by role index in exp_.models
  std::vector<int> responses_;               // sample response lengths, ascending
  double mean_prompt_ = 0, mean_response_ = 0;
  CommProfile comm_;
  int max_micro_ = 32;
};

}  // namespace braid::plan
