#include "plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"

namespace braid::plan {
namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Decode steps are costed in at most this many blocks per call.
constexpr int kDecodeBlocks = 128;

}  // namespace

const char* kind_name(CallKind k) {
  switch (k) {
    case CallKind::generate: return "generate";
    case CallKind::inference: return "inference";
    case CallKind::train: return "train";
  }
  return "?";
}

std::vector<Call> dataflow_calls(const Experiment& e) {
  std::vector<Call> calls{{"actor_gen", "actor", CallKind::generate},
                          {"ref_inf", "ref", CallKind::inference},
                          {"reward_inf", "reward", CallKind::inference}};
  if (e.algorithm == Algorithm::ppo) calls.push_back({"critic_inf", "critic", CallKind::inference});
  calls.push_back({"actor_train", "actor", CallKind::train});
  if (e.algorithm == Algorithm::ppo) calls.push_back({"critic_train", "critic", CallKind::train});
  return calls;
}

CostModel::CostModel(const Experiment& e, const Profile& p, const Cluster& c) : exp_(e), prof_(p), cl_(c) {
  std::vector<std::string> missing;
  for (const auto& m : e.models) {
    const ModelProfile* mp = p.find(m.shape);
    if (mp == nullptr) missing.push_back(fmt::format("{} ({})", m.role, m.shape.key()));
    models_.push_back(mp);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& s : missing) list += (list.empty() ? "" : ", ") + s;
    throw InputError("profile", "models", "has no entry for the shape of " + list +
                                              " (profile these models, or use --hardware for an analytic profile)");
  }
  responses_ = e.response_len.quantiles(e.global_batch);
  const auto prompts = e.prompt_len.quantiles(e.global_batch);
  mean_prompt_ = std::accumulate(prompts.begin(), prompts.end(), 0.0) / e.global_batch;
  mean_response_ = std::accumulate(responses_.begin(), responses_.end(), 0.0) / e.global_batch;
  comm_ = p.comm;
  // A cluster file may correct the profile's links (same efficiency as the profile's).
  const Hardware& hw = p.hardware;
  if (c.intra_bandwidth) {
    const double scale = *c.intra_bandwidth / hw.intra_bandwidth;
    comm_.p2p_intra.bandwidth *= scale;
    comm_.allreduce_intra.bandwidth *= scale;
  }
  if (c.inter_bandwidth) {
    const double scale = *c.inter_bandwidth / hw.inter_bandwidth;
    comm_.p2p_inter.bandwidth *= scale;
    comm_.allreduce_inter.bandwidth *= scale;
  }
}

double CostModel::device_memory() const {
  const double cap = cl_.device_memory.value_or(prof_.hardware.mem_capacity);
  return cap * (1.0 - cl_.memory_reserve);
}

const ModelProfile& CostModel::model(const std::string& role) const {
  for (std::size_t i = 0; i < exp_.models.size(); ++i) {
    if (exp_.models[i].role == role) return *models_[i];
  }
  throw std::logic_error("no model for role " + role);
}

double CostModel::allreduce(double bytes, int n, bool inter) const {
  if (n <= 1) return 0;
  const LinkCosts& l = inter ? comm_.allreduce_inter : comm_.allreduce_intra;
  // Ring bandwidth term; small messages take a tree's log2(n) steps each way (NCCL's LL protocols).
  return 2.0 * (n - 1) / n * bytes / l.bandwidth + 2.0 * std::ceil(std::log2(n)) * l.latency;
}

double CostModel::p2p(double bytes, bool inter) const {
  const LinkCosts& l = inter ? comm_.p2p_inter : comm_.p2p_intra;
  return bytes / l.bandwidth + l.latency;
}

std::vector<Strategy> CostModel::strategies(const Call& call, int devices) const {
  std::vector<Strategy> out;
  const ModelProfile& m = model(call.role);
  const int batch = exp_.global_batch;
  for (int tp = 1; tp <= std::min(devices, cl_.devices_per_node); tp *= 2) {
    if (devices % tp != 0 || m.shape.heads % tp != 0) continue;
    for (int pp = 1; pp <= devices / tp; ++pp) {
      if ((devices / tp) % pp != 0 || pp > m.shape.layers) continue;
      const int dp = devices / tp / pp;
      if (call.kind == CallKind::train) {
        if (exp_.mini_batch % dp != 0) continue;
        const int per_replica = exp_.mini_batch / dp;
        // Recomputation as the experiment fixes it, or both ways when it leaves it to the plan.
        const std::vector<int> recompute =
            exp_.train.recompute_auto ? std::vector<int>{0, 1} : std::vector<int>{exp_.train.recompute};
        for (int r : recompute) {
          if (exp_.micro_batch) {
            if (per_replica % *exp_.micro_batch != 0) continue;
            out.push_back({dp, tp, pp, per_replica / *exp_.micro_batch, r});
          } else {
            for (int mb = 1; mb <= std::min(per_replica, 64); mb *= 2) {
              if (per_replica % mb == 0) out.push_back({dp, tp, pp, mb, r});
            }
          }
        }
      } else {
        if (dp > batch) continue;
        const int per_replica = ceil_div(batch, dp);
        for (int mb = 1; mb <= std::min(per_replica, max_micro_); mb *= 2) out.push_back({dp, tp, pp, mb});
      }
    }
  }
  return out;
}

double CostModel::layer_unit_fwd(const ModelProfile& m, int tp, double tokens, double seq, bool prefill) const {
  const double bytes = tokens * static_cast<double>(m.shape.hidden) * prof_.hardware.dtype_bytes;
  const Table2& t = prefill ? m.prefill_table() : m.layer_fwd;
  return t.at(tokens, seq) / tp + 2.0 * allreduce(bytes, tp, false);
}

double CostModel::layer_unit_bwd(const ModelProfile& m, int tp, double tokens, double seq) const {
  const double bytes = tokens * static_cast<double>(m.shape.hidden) * prof_.hardware.dtype_bytes;
  // A frozen base (LoRA) computes the input's gradient and no weight gradient: about half of
  // the table's backward, whose products are the two alike in size (the adapters' own are
  // rank / hidden of that and left out).
  const double share = exp_.train.lora_rank > 0 ? 0.5 : 1.0;
  return share * m.layer_bwd.at(tokens, seq) / tp + 2.0 * allreduce(bytes, tp, false);
}

double CostModel::trained_params_per_layer(const ModelProfile& m) const {
  return exp_.train.lora_rank > 0 ? m.shape.layer_lora_params(exp_.train.lora_rank) : m.shape.layer_params();
}

double CostModel::stage_param_bytes(const ModelProfile& m, int tp, int pp, double per_layer, double per_end) const {
  // The largest stage: ceil(L/pp) layers, plus the embedding or head at an end.
  const double lps = std::ceil(static_cast<double>(m.shape.layers) / pp);
  const double ends = pp == 1 ? m.shape.embedding_params() + m.shape.head_params()
                              : std::max(m.shape.embedding_params(), m.shape.head_params());
  return (lps * m.shape.layer_params() * per_layer + ends * per_end) / tp;
}

// Forward through a pipeline of s.pp stages, `micro` micro-batches of `tokens`
// tokens each: (micro - 1) x the slowest stage + the sum of all stages.
double CostModel::pipeline_fwd(const ModelProfile& m, const Strategy& s, bool spans, double tokens, double seq,
                               int micro, bool prefill) const {
  const double unit = layer_unit_fwd(m, s.tp, tokens, seq, prefill);
  const double lps = std::ceil(static_cast<double>(m.shape.layers) / s.pp);
  const double emb = m.embed_fwd.at(tokens), head = m.head_fwd.at(tokens) / s.tp;
  const double hop = s.pp > 1 ? p2p(tokens * static_cast<double>(m.shape.hidden) * prof_.hardware.dtype_bytes, spans) : 0;
  const double max_stage = lps * unit + (s.pp == 1 ? emb + head : std::max(emb, head)) + hop;
  const double sum_stages = m.shape.layers * unit + emb + head + (s.pp - 1) * hop;
  return (micro - 1) * max_stage + sum_stages;
}

CallEstimate CostModel::estimate(const Call& call, const Mesh& mesh, const Strategy& s) const {
  switch (call.kind) {
    case CallKind::train: return estimate_train(call, mesh, s);
    case CallKind::inference: return estimate_inference(call, mesh, s);
    case CallKind::generate: return estimate_generate(call, mesh, s);
  }
  return {};
}

CostModel::StageTimes CostModel::train_stages(const std::string& role, int stages, int tp, int dp, bool spans,
                                              double samples_per_micro, int recompute) const {
  const ModelProfile& m = model(role);
  StageTimes st;
  const double seq = mean_total();
  const double tokens = samples_per_micro * seq;
  const double fu = layer_unit_fwd(m, tp, tokens, seq), bu = layer_unit_bwd(m, tp, tokens, seq);
  const double dt = prof_.hardware.dtype_bytes;
  const double out = m.shape.value_head ? 1.0 : static_cast<double>(m.shape.vocab);
  const int layers = static_cast<int>(m.shape.layers);
  // A layer's activations kept for the backward, per token: the profile's, and under LoRA
  // x·Aᵀ of its seven adapters (f32, as braid keeps them).
  const double slot = m.memory.act_per_token + 7.0 * exp_.train.lora_rank * 4.0;
  for (int k = 0; k < stages; ++k) {
    const int l0 = layers * k / stages, l1 = layers * (k + 1) / stages;
    // Recomputed layers (index a multiple of `recompute`) keep only their input and share one
    // slot, into which the backward runs their forward again.
    int again = 0;
    for (int l = l0; l < l1; ++l) again += recompute > 0 && l % recompute == 0;
    double f = (l1 - l0) * fu, b = (l1 - l0) * bu + again * fu;
    const double input = static_cast<double>(m.shape.hidden) * dt;
    const double kept = (l1 - l0 - again) * slot + (again > 0 ? slot + again * input : 0);
    double act = tokens * kept / tp;
    if (k == 0) {
      f += m.embed_fwd.at(tokens);
      b += m.embed_bwd.at(tokens);
    }
    if (k == stages - 1) {
      f += m.head_fwd.at(tokens) / tp;
      b += m.head_bwd.at(tokens) / tp;
      act += tokens * out * 4.0 / tp;  // fp32 logits kept for the loss
      // What a real training step pays beyond the tables, per micro-batch (measured).
      b += m.train_extra.micro + m.train_extra.token * tokens;
    }
    st.fwd.push_back(f);
    st.bwd.push_back(b);
    st.act_bytes.push_back(act);
  }
  st.p2p = stages > 1 ? p2p(tokens * static_cast<double>(m.shape.hidden) * dt, spans) : 0;
  const bool dp_inter = spans && tp * dp > cl_.devices_per_node;
  const double bandwidth = prof_.hardware.mem_bandwidth * prof_.hardware.eff.memory;
  if (exp_.train.lora_rank > 0) {
    // LoRA: only the adapters' f32 gradients are all-reduced, and Adam streams the adapters,
    // their gradients and moments.
    const double adapters = m.shape.layers * trained_params_per_layer(m) / stages / tp;
    st.sync = m.train_extra.step + allreduce(4.0 * adapters, dp, dp_inter) +
              adapters * (4.0 + 4.0 + 2.0 * 8.0 / dp) / bandwidth;
    return st;
  }
  const double stage_params = m.shape.total_params() / stages / tp;
  // Gradient all-reduce of fp32 gradients, then Adam streams weights, gradients and states.
  st.sync = m.train_extra.step + allreduce(4.0 * stage_params, dp, dp_inter) +
            stage_params * (m.memory.weights + m.memory.gradients + 2.0 * m.memory.optimizer / dp) /
                m.shape.layer_params() / bandwidth;
  return st;
}

CallEstimate CostModel::estimate_train(const Call& call, const Mesh& mesh, const Strategy& s) const {
  const ModelProfile& m = model(call.role);
  CallEstimate e;
  const bool spans = mesh.spans_nodes(cl_.devices_per_node);
  const double samples_per_micro = static_cast<double>(exp_.mini_batch) / s.dp / s.micro;
  const StageTimes st = train_stages(call.role, s.pp, s.tp, s.dp, spans, samples_per_micro, s.recompute);
  double max_stage = 0, sum_stages = 0, max_act = 0;
  for (int k = 0; k < s.pp; ++k) {
    const double fb = st.fwd[k] + st.bwd[k] + (s.pp > 1 ? 2 * st.p2p : 0);
    max_stage = std::max(max_stage, fb);
    sum_stages += fb;
    // 1F1B keeps at most pp - k micro-batches in flight on stage k.
    max_act = std::max(max_act, std::min(s.micro, s.pp - k) * st.act_bytes[k]);
  }
  const double per_step = (s.micro - 1) * max_stage + sum_stages + st.sync;
  const int steps = exp_.global_batch / exp_.mini_batch * exp_.ppo_epochs;
  e.time = steps * per_step;
  e.active_bytes = max_act;
  const int dt = prof_.hardware.dtype_bytes;
  e.layout_weights = stage_param_bytes(m, s.tp, s.pp, m.memory.weights / m.shape.layer_params(), dt);
  if (exp_.train.lora_rank > 0) {
    // LoRA: the base frozen (its weights alone, and one f32 gradient scratch of its largest
    // matrix), the adapters f32 with their gradients and two moments (a critic's value head,
    // trained in full beside them, is one row more).
    const double lps = std::ceil(static_cast<double>(m.shape.layers) / s.pp);
    const double h = static_cast<double>(m.shape.hidden);
    const double adapters = (lps * trained_params_per_layer(m) + (m.shape.value_head ? h : 0.0)) / s.tp;
    const double largest = std::max(static_cast<double>(m.shape.intermediate), static_cast<double>(m.shape.vocab)) * h;
    e.static_bytes = e.layout_weights + adapters * (4.0 + 4.0 + 8.0 / s.dp) + 4.0 * largest / s.tp;
  } else {
    const double per_param_grad = 4.0, per_param_opt = m.memory.optimizer / m.shape.layer_params() / s.dp;
    e.static_bytes = e.layout_weights + stage_param_bytes(m, s.tp, s.pp, per_param_grad + per_param_opt,
                                                          per_param_grad + per_param_opt);
  }
  e.valid = std::isfinite(e.time);
  return e;
}

CallEstimate CostModel::estimate_inference(const Call& call, const Mesh& mesh, const Strategy& s) const {
  const ModelProfile& m = model(call.role);
  CallEstimate e;
  const bool spans = mesh.spans_nodes(cl_.devices_per_node);
  const int per_replica = ceil_div(exp_.global_batch, s.dp);
  const int micro = std::min(s.micro, per_replica);
  const double seq = mean_total();
  const double tokens = std::ceil(static_cast<double>(per_replica) / micro) * seq;
  e.time = pipeline_fwd(m, s, spans, tokens, seq, micro);
  // Results go back to the samples' owners: a few floats per token, negligible beside the pass.
  const double out = m.shape.value_head ? 1.0 : static_cast<double>(m.shape.vocab);
  e.active_bytes = tokens * (2.0 * m.memory.act_per_token + out * 4.0 / s.tp);
  const int dt = prof_.hardware.dtype_bytes;
  e.layout_weights = stage_param_bytes(m, s.tp, s.pp, m.memory.weights / m.shape.layer_params(), dt);
  e.static_bytes = e.layout_weights;  // frozen models stay resident in their inference layout
  e.valid = std::isfinite(e.time);
  return e;
}

double CostModel::kv_bytes_per_sample_token(const Strategy& s) const {
  const ModelProfile& m = model("actor");
  return m.memory.kv_per_token * std::ceil(static_cast<double>(m.shape.layers) / s.pp) / s.tp;
}

double CostModel::bs_max_per_replica(const Strategy& s) const { return model("actor").bs_max * s.pp; }

double CostModel::decode_step(const Strategy& s, bool spans, double active, double kv_len) const {
  if (active <= 0) return 0;
  const ModelProfile& m = model("actor");
  const double micro = std::min(static_cast<double>(s.micro), active);
  const double b = std::ceil(active / micro);
  const double lps = std::ceil(static_cast<double>(m.shape.layers) / s.pp);
  const double bytes = b * static_cast<double>(m.shape.hidden) * prof_.hardware.dtype_bytes;
  // The head's logits, then each row's next token drawn from them.
  const double stage = lps * (m.layer_decode.at(b, kv_len) / s.tp + 2.0 * allreduce(bytes, s.tp, false)) +
                       m.head_fwd.at(b) / s.tp + m.sample.at(b);
  const double hops = s.pp > 1 ? s.pp * p2p(bytes, spans) : 0;
  return std::max(micro, static_cast<double>(s.pp)) * stage + hops;
}

GenTimeline CostModel::gen_timeline(const Mesh& mesh, const Strategy& s) const {
  GenTimeline g;
  const ModelProfile& m = model("actor");
  const bool spans = mesh.spans_nodes(cl_.devices_per_node);
  const int per_replica = ceil_div(exp_.global_batch, s.dp);
  const int micro = std::min(s.micro, per_replica);
  const double tokens = std::ceil(static_cast<double>(per_replica) / micro) * mean_prompt_;
  // The generator prefills through the KV-cache path, slower than the packed forward.
  // Each prompt's first token is drawn from the prefill's logits.
  g.prefill = pipeline_fwd(m, s, spans, tokens, mean_prompt_, micro, true) + m.sample.at(per_replica);
  const int max_len = responses_.empty() ? 0 : responses_.back();
  const int block = std::max(1, ceil_div(max_len, kDecodeBlocks));
  double t = g.prefill;
  const int n = static_cast<int>(responses_.size());
  for (int s0 = 0; s0 < max_len; s0 += block) {
    // Samples still generating at step s0: those longer than s0 tokens.
    const int done = static_cast<int>(std::upper_bound(responses_.begin(), responses_.end(), s0) - responses_.begin());
    const int remaining = n - done;
    const int steps = std::min(block, max_len - s0);
    g.blocks.push_back({s0, steps, remaining, t});
    const double active = std::ceil(static_cast<double>(remaining) / s.dp);
    t += steps * decode_step(s, spans, active, mean_prompt_ + s0 + 0.5 * steps);
  }
  g.end = t;
  return g;
}

CallEstimate CostModel::estimate_generate(const Call& call, const Mesh& mesh, const Strategy& s) const {
  const ModelProfile& m = model(call.role);
  CallEstimate e;
  const GenTimeline g = gen_timeline(mesh, s);
  e.time = g.end;
  // KV cache peaks where remaining samples x their length is largest.
  double kv_peak = 0;
  for (const auto& b : g.blocks) {
    const double active = std::ceil(static_cast<double>(b.remaining) / s.dp);
    kv_peak = std::max(kv_peak, active * (mean_prompt_ + b.step0 + b.steps));
  }
  const int per_replica = ceil_div(exp_.global_batch, s.dp);
  const double out = static_cast<double>(m.shape.vocab);
  e.active_bytes = kv_peak * kv_bytes_per_sample_token(s) +
                   std::ceil(static_cast<double>(per_replica) / s.micro) * out * 4.0 / s.tp;
  const int dt = prof_.hardware.dtype_bytes;
  e.layout_weights = stage_param_bytes(m, s.tp, s.pp, m.memory.weights / m.shape.layer_params(), dt);
  e.static_bytes = 0;
  e.valid = std::isfinite(e.time);
  return e;
}

double CostModel::realloc_time(const std::string& role, const Mesh& from, const Strategy& sf, const Mesh& to,
                               const Strategy& st) const {
  if (from == to && sf.tp == st.tp && sf.pp == st.pp) return 0;
  const ModelProfile& m = model(role);
  const double per_dest = m.shape.total_params() * prof_.hardware.dtype_bytes / (st.tp * st.pp);
  // Sources broadcast in parallel; a destination inside the nodes of the source
  // mesh is fed over NVLink, otherwise over the network (ReaL §6).
  const int pn = cl_.devices_per_node;
  const Mesh from_nodes{from.first / pn * pn, ((from.end() - 1) / pn + 1) * pn - from.first / pn * pn};
  const bool local = from_nodes.contains(to);
  return p2p(per_dest, !local);
}

}  // namespace braid::plan
