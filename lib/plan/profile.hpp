// profile.json ("braid.profile" v1): what one device costs per decoder layer,
// embedding and head, per model shape, plus the links between devices. The
// same file comes from a measurement (braid-profile measure) or from the
// analytic model (braid-profile analytic); the cost model reads only this.
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "plan/hardware.hpp"
#include "plan/host_costs.hpp"
#include "plan/model_shape.hpp"
#include "plan/table.hpp"

namespace braid::plan {

inline constexpr int kProfileVersion = 1;

// Bytes one device holds per decoder layer (unsharded: tp = pp = dp = 1).
struct LayerMemory {
  double weights = 0;           // at the working dtype
  double gradients = 0;         // fp32 main gradients
  double optimizer = 0;         // Adam moments (+ fp32 master weights under bf16)
  double act_per_token = 0;     // activations kept for backward, per token
  double kv_per_token = 0;      // key + value cache, per token
  double embedding_weights = 0;
  double head_weights = 0;
};

// Times of one device running one piece of the model with tp = 1.
struct ModelProfile {
  std::string name;
  ModelShape shape;
  Table2 layer_fwd;     // tokens x seq_len (a micro-batch of `tokens` tokens in sequences of seq_len)
  Table2 layer_bwd;
  // tokens x seq_len through the KV-cache path (generation's prefill); empty in
  // profiles written before it existed: prefill_table() then answers layer_fwd.
  Table2 layer_prefill;
  Table1 embed_fwd;     // tokens
  Table1 embed_bwd;
  Table1 head_fwd;      // tokens (logits + log-softmax, or the value head)
  Table1 head_bwd;
  Table2 layer_decode;  // batch x kv_len: one decode step of one layer
  // rows: drawing the next token of `rows` sequences from their logits (a decode
  // step's sampling). Models with an LM head only; empty in profiles written
  // before it existed, and then costs nothing.
  Table1 sample;
  double bs_max = 1;    // decode batch beyond which a step stops being nearly constant
  // What a real training step costs beyond the tables (measured; plan/train_probe.hpp): per
  // micro-batch, per token of a micro-batch, per optimizer step. Zero when not measured.
  struct TrainExtra {
    double micro = 0, token = 0, step = 0;  // seconds
  } train_extra;
  LayerMemory memory;
  ordered_json spread;  // measured only: relative spread (max-min)/median per table

  const Table2& prefill_table() const { return layer_prefill.v.empty() ? layer_fwd : layer_prefill; }
};

struct LinkCosts {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // seconds
};

struct CommProfile {
  LinkCosts p2p_intra, p2p_inter;
  LinkCosts allreduce_intra, allreduce_inter;  // bus bandwidth of a ring all-reduce
};

struct Profile {
  std::string source;  // "analytic", "calibrated", "measured"
  Hardware hardware;
  CommProfile comm;
  std::vector<ModelProfile> models;
  HostCosts host;      // measured only ("host"): what a run pays outside the passes

  // The entry for this shape, or nullptr.
  const ModelProfile* find(const ModelShape& s) const;
};

ordered_json profile_to_json(const Profile& p);
// Validates every field; throws InputError listing all problems.
Profile profile_from_json(const json& doc, const std::string& file);
Profile load_profile(const std::string& file);

// BS_max from a decode table: the largest batch whose step time at the
// smallest kv length stays within `tolerance` of the batch-1 step.
double find_bs_max(const Table2& layer_decode, double tolerance = 0.25);

}  // namespace braid::plan
