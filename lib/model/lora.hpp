// LoRA adapters (Hu et al., 2021, "LoRA: Low-Rank Adaptation of Large Language Models") on a
// model's linear layers: a layer y = x·Wᵀ becomes y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with A [rank × in]
// and B [out × rank], s = alpha / rank (rsLoRA, Kalajdzievski 2023: alpha / √rank). The
// base weights W stay frozen; only A and B are trained (model/model.hpp: adapters()), and
// with `value_head` a copy of the value head beside them, trained in full (PEFT's
// modules_to_save: a reward model's or critic's head is new, so no adapter can learn it).
#pragma once

#include <string>
#include <vector>

namespace braid::model {

// The linear layers an adapter can sit on, by their Hugging Face module names, in the order
// a layer runs them.
const std::vector<std::string>& lora_modules();

// Bounds of a rank and an alpha (a run file's train.lora_rank and lora_alpha, PEFT's r and
// lora_alpha, braid-train's --lora-rank and --lora-alpha).
constexpr int kMaxLoraRank = 65536;
constexpr double kMaxLoraAlpha = 1e6;

struct LoraOptions {
  int rank = 0;                      // 0: no adapters
  double alpha = 16;
  // PEFT's lora_dropout: in a training forward (a Batch with a DropoutDraw) each adapter's
  // input is x·mask/(1 − p) (inverted dropout, the mask drawn per element from the draw's
  // seed, the token's sequence key and position, the adapter and the column); scoring,
  // generation and evaluation run without it. In [0, 1).
  double dropout = 0;
  bool rslora = false;               // s = alpha / √rank instead of alpha / rank
  std::vector<std::string> targets;  // names of lora_modules(); empty: all of them
  // The value head (score.weight, score.bias) trained in full beside the adapters: a copy of
  // the base's, which stays as it is (PEFT's modules_to_save ["score"]).
  bool value_head = false;

  bool enabled() const { return rank > 0; }
  double scaling() const;
  bool targets_module(const std::string& module) const;
};

// "q,k,v,o,gate,up,down" (or "q_proj,v_proj"; "all" or "" for every module) as module names,
// in lora_modules()' order; std::invalid_argument naming an unknown one.
std::vector<std::string> parse_lora_targets(const std::string& list);

// Whether two options make the same adapters (rank, alpha, rsLoRA, modules, value head and
// dropout).
bool same_adapters(const LoraOptions& a, const LoraOptions& b);
// "rank 8, alpha 16 on q_proj,k_proj" (", rsLoRA" when it is; ", dropout 0.05" when not 0;
// ", the value head trained" with value_head).
std::string describe(const LoraOptions& o);

// std::invalid_argument when the options cannot be used (rank outside [0, kMaxLoraRank], alpha
// outside (0, kMaxLoraAlpha], dropout outside [0, 1), an unknown target).
void check_lora(const LoraOptions& o);

}  // namespace braid::model
