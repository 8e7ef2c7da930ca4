#include "memory/prediction.hpp"

#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/units.hpp"
#include "io/weight_shard.hpp"
#include "rl/chunked_lm_head.hpp"

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

#include <fmt/format.h>

#include <algorithm>

namespace braid::memory {

namespace {

constexpr std::uint64_t kF32 = 4, kI32 = 4;

std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)); }

// The stage's layers and this tp rank's share of heads and units, as BasicModel holds them.
struct Dims {
  std::int64_t begin, layers, D, qkv, hd_all, heads, kv_heads, inter, vocab;
  bool last;
};

Dims dims_of(const model::ModelConfig& c, const model::ModelOptions& o) {
  const int tp = std::max(o.tp.size, 1);
  const int end = o.layers.end < 0 ? c.num_hidden_layers : o.layers.end;
  const std::int64_t heads = c.num_attention_heads / tp, kv = c.num_key_value_heads / tp;
  const std::int64_t hd = c.head_dim();
  return {.begin = o.layers.begin,
          .layers = end - o.layers.begin,
          .D = c.hidden_size,
          .qkv = (heads + 2 * kv) * hd,
          .hd_all = heads * hd,
          .heads = heads,
          .kv_heads = kv,
          .inter = (c.intermediate_size + tp - 1) / tp,
          .vocab = c.vocab_size,
          .last = end == c.num_hidden_layers};
}

std::string role_prefix(const ModelSpec& m) { return m.role.empty() ? "" : m.role + " "; }

}  // namespace

void Prediction::append(const Prediction& other) { parts.insert(parts.end(), other.parts.begin(), other.parts.end()); }

std::uint64_t Prediction::total() const {
  std::uint64_t t = 0;
  for (const Part& p : parts) t += p.bytes;
  return t;
}

std::string Prediction::describe() const {
  std::string out;
  for (const Part& p : parts) {
    if (p.bytes == 0) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", p.name, gib(p.bytes));
  }
  return out;
}

Prediction model_bytes(const ModelSpec& m) {
  const std::uint64_t n = u(model::parameter_count(m.config, m.options));
  const backend::DType dt = m.options.dtype == backend::DType::bf16 ? backend::DType::bf16 : backend::DType::f32;
  const std::string who = role_prefix(m);
  Prediction p;
  p.add(fmt::format("{}weights ({})", who, backend::dtype_name(dt)), n * backend::dtype_size(dt));
  if (m.options.lora.enabled()) {
    // A frozen base: one gradient scratch of its largest vector (model.cpp).
    p.add(who + "gradient scratch of the frozen base (f32)", u(model::frozen_gradient_scratch(m.config, m.options)) * kF32);
  } else {
    p.add(who + "gradients (f32)", n * kF32);
  }
  // cos and sin, [max_position_embeddings × head_dim / 2] each; twice with the sliding
  // layers' own RoPE (gemma3).
  const std::uint64_t tables = m.config.has_local_rope() && m.config.sliding_window > 0 ? 2 : 1;
  p.add(who + "rotary tables", tables * 2 * u(m.config.max_position_embeddings) * u(m.config.head_dim() / 2) * kF32);
  // LoRA: the adapters and their gradients, f32 (model/lora.cpp).
  if (m.options.lora.enabled()) {
    p.add(who + "LoRA adapters and gradients (f32)", 2 * u(model::adapter_count(m.config, m.options)) * kF32);
    // Under tp: the replicated adapters' gradient parts, kept apart until summed over the group.
    if (const auto partial = u(model::adapter_partial_count(m.config, m.options)); partial > 0)
      p.add(who + "LoRA gradient parts to sum over tp (f32)", partial * kF32);
  }
  return p;
}

std::uint64_t adamw_bytes(const ModelSpec& m) {
  // Under LoRA the optimizer holds the f32 adapters alone: two moments each.
  if (m.options.lora.enabled()) return u(model::adapter_count(m.config, m.options)) * kF32 * 2;
  const std::uint64_t n = u(model::parameter_count(m.config, m.options));
  const bool master = m.options.dtype == backend::DType::bf16;
  return n * kF32 * (master ? 3 : 2);
}

std::uint64_t activation_bytes(const model::ModelConfig& cfg, const model::ModelOptions& mopt,
                               const model::ActivationOptions& opt) {
  const Dims d = dims_of(cfg, mopt);
  // Training: a slot per kept layer and one shared by the recomputed ones (make_activations).
  std::int64_t kept = d.layers;
  if (opt.training && opt.recompute > 0) {
    for (std::int64_t l = 0; l < d.layers; ++l) kept -= model::recomputed_layer(int(d.begin + l), opt.recompute);
  }
  const std::int64_t slots = opt.training ? kept + (kept < d.layers ? 1 : 0) : 1;
  const std::uint64_t N = u(opt.max_tokens), S = u(slots), D = u(d.D);
  const std::uint64_t qkv = u(d.qkv), att = u(d.hd_all), H = u(d.heads), I = u(d.inter);
  std::uint64_t f32 = 0;   // elements
  f32 += (opt.training ? u(d.layers) + 1 + S : 1) * N * D;                   // resid
  f32 += S * N * (D + 1 + qkv + att + H + D + 1 + 2 * I + I);                 // ln1 rstd1 qkv att lse ln2 rstd2 gate_up act
  if (d.last) f32 += N * D + N + u(opt.max_sequences) * D;                    // final_out final_rstd last_rows
  if (d.last && mopt.lm_head && !opt.training) f32 += u(opt.max_sequences) * u(d.vocab);  // logits (forward_cached)
  if (opt.training) f32 += N * (3 * D + qkv + att + 2 * I + I);              // out_grad d_res d_ln d_qkv d_att d_gate_up d_act
  // The pieces of other families (model_impl.hpp).
  if (cfg.qk_norm) {
    if (opt.training) f32 += S * N * qkv;                                     // qkv_pre
    f32 += S * N * (H + u(d.kv_heads));                                       // qk_rstd
    if (opt.training && mopt.tp.size > 1) f32 += 2 * u(cfg.head_dim());       // d_qk_norm
  }
  if (cfg.sandwich_norms) {
    f32 += S * N * 2 * (D + 1) + N * D;                                       // attn_out rstd_ao mlp_out rstd_mo normed
    if (opt.training) f32 += N * D;                                           // d_norm_out
  }
  const bool score_bias = d.last && mopt.value_head && mopt.value_bias;
  if (cfg.qkv_bias || cfg.o_bias || cfg.mlp_bias || score_bias) f32 += N;     // ones
  // LoRA: x·Aᵀ of each adapter per token and slot, and in training one adapter's gradient of it.
  f32 += S * N * u(model::adapter_columns(mopt));
  if (opt.training && mopt.lora.enabled()) f32 += N * u(mopt.lora.rank);
  // LoRA dropout: one adapter's masked input (the widest: D, o's heads or down's units) and a
  // 64-bit key per row.
  std::uint64_t u64 = 0;
  if (opt.training && mopt.lora.enabled() && mopt.lora.dropout > 0) {
    std::uint64_t widest = 0;
    for (const std::string& module : model::lora_modules()) {
      if (!mopt.lora.targets_module(module)) continue;
      widest = std::max(widest, module == "o_proj" ? att : module == "down_proj" ? I : D);
    }
    f32 += N * widest;
    u64 += N;
  }
  const std::uint64_t i32 = 7 * N;                                            // tokens pos step(5N)
  return f32 * kF32 + i32 * kI32 + u64 * 8;
}

std::int64_t lm_head_chunk_rows(const backend::Backend& be, const model::ModelConfig& cfg) {
  return rl::default_chunk_rows(be, cfg.vocab_size, sizeof(float));
}

std::uint64_t lm_head_chunk_bytes(const model::ModelConfig& cfg, std::int64_t chunk_rows) {
  // logits [chunk × vocab] (twice with a final soft-cap: the capped logits kept for the
  // backward), lse, logprob, entropy [chunk].
  const std::uint64_t logits = cfg.final_logit_softcapping > 0 ? 2 : 1;
  return (logits * u(chunk_rows) * u(cfg.vocab_size) + 3 * u(chunk_rows)) * kF32;
}

Prediction predict_training(const std::vector<TrainedModel>& models, std::int64_t micro_tokens, int recompute) {
  Prediction p;
  for (const TrainedModel& t : models) {
    const std::string who = role_prefix(t.model);
    p.append(model_bytes(t.model));
    const char* state = t.model.options.lora.enabled()                     ? " of the adapters)"
                        : t.model.options.dtype == backend::DType::bf16 ? " and master)"
                                                                          : ")";
    p.add(who + "AdamW state (f32 moments" + state, adamw_bytes(t.model));
    // The trainer sizes its activations once, to --micro-tokens tokens and as many sequences.
    p.add(fmt::format("{}activations ({} tokens, {})", who, micro_tokens,
                      recompute == 0   ? std::string("every layer kept")
                      : recompute == 1 ? std::string("every layer recomputed")
                                       : fmt::format("every {}th layer recomputed", recompute)),
          activation_bytes(t.model.config, t.model.options,
                           {.max_tokens = micro_tokens, .max_sequences = micro_tokens, .training = true,
                            .recompute = recompute}));
    if (t.lm_head_chunk_rows > 0) {
      p.add(fmt::format("{}LM-head chunk ({} rows)", who, t.lm_head_chunk_rows),
            lm_head_chunk_bytes(t.model.config, t.lm_head_chunk_rows));
    }
    // Each array grows to at most twice what a micro-batch asked of it.
    p.add(who + "loss arrays", u(t.loss_rows) * 2 * u(micro_tokens) * kF32);
  }
  return p;
}

Prediction predict_scoring(const std::vector<ScoredModel>& models, MicroBatchShape largest) {
  Prediction p;
  for (const ScoredModel& s : models) {
    const std::string who = role_prefix(s.model);
    if (s.count_model) p.append(model_bytes(s.model));
    p.add(fmt::format("{}activations ({} tokens, {} sequences)", who, largest.tokens, largest.sequences),
          activation_bytes(s.model.config, s.model.options,
                           {.max_tokens = largest.tokens, .max_sequences = largest.sequences}));
    if (s.lm_head_chunk_rows > 0) {
      p.add(fmt::format("{}LM-head chunk ({} rows)", who, s.lm_head_chunk_rows),
            lm_head_chunk_bytes(s.model.config, s.lm_head_chunk_rows));
    }
    p.add(who + "output arrays", u(s.output_rows) * u(largest.tokens) * kF32);
  }
  return p;
}

ModelSpec peek_checkpoint(const std::string& spec, const std::string& role, backend::DType dtype,
                          const model::LoraOptions& lora) {
  // A LoRA adapter file: its base with its adapters (checkpoint/adapters.hpp).
  if (const auto adapters = checkpoint::read_adapter_file(spec)) {
    return peek_checkpoint(adapters->base.string(), role, dtype, adapters->lora);
  }
  // The files open_model would read (a whole checkpoint, or tp rank 0's), headers only.
  const io::WeightShardSet shards(checkpoint::files_of_tp_rank(checkpoint::checkpoint_files(spec), {}));
  ModelSpec m;
  m.role = role;
  m.config = checkpoint::config_of(shards);
  m.options.lm_head = shards.contains("lm_head.weight") || m.config.tie_word_embeddings;
  m.options.value_head = shards.contains("score.weight");
  m.options.value_bias = m.options.value_head && shards.contains("score.bias");
  m.options.dtype = dtype;
  m.options.lora = lora;
  return m;
}

void require_fits(const Prediction& p, const backend::DeviceMemory& mem, const std::string& device,
                  const std::string& advice) {
  const std::uint64_t need = p.total();
  if (need <= mem.free) return;
  throw InputError("--device " + device, "device memory",
                   fmt::format("this run needs {} and {} of the device's {} are free: {}{}{}", gib(need),
                               gib(mem.free), gib(mem.total), p.describe(), advice.empty() ? "" : ". ", advice));
}

void require_fits(const Prediction& p, const backend::Backend& be, const std::string& device,
                  const std::string& advice) {
  const std::optional<backend::DeviceMemory> mem = be.device_memory();
  if (!mem) return;
  log::info("device memory: {} predicted ({}), {} free of {}", gib(p.total()), p.describe(), gib(mem->free),
            gib(mem->total));
  require_fits(p, *mem, device, advice);
}

std::optional<std::uint64_t> device_peak(backend::Backend& be) {
#ifdef BRAID_HAVE_CUDA
  if (const auto s = backend::device_memory_stats(be)) return s->peak;
#else
  (void)be;
#endif
  return std::nullopt;
}

void log_peak(backend::Backend& be, const Prediction& p) {
  if (const auto peak = device_peak(be)) {
    log::info("device memory: peak {} ({} bytes) of {} predicted ({} bytes)", gib(*peak), *peak, gib(p.total()),
              p.total());
  }
}

}  // namespace braid::memory
