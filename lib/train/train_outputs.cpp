#include "train/train_outputs.hpp"

#include "checkpoint/adapters.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "train/optimizer_state.hpp"
#include "io/stage_stats.hpp"

namespace braid::train {

std::vector<std::filesystem::path> save_checkpoint(const model::Model& m, optim::AdamW& opt,
                                                   const std::filesystem::path& out, const checkpoint::SaveInfo& info,
                                                   bool write) {
  // Nothing under either name when the weights diverged; the state's writer refuses
  // non-finite moments before its file exists. (Data parallel with bf16 weights, the
  // check reads the bf16 copy, which a NaN or Inf master rounds to.)
  const model::TensorParallel& tp = m.tensor_parallel();
  const std::filesystem::path weights = checkpoint::tp_path(out, tp.rank, tp.size);
  const std::filesystem::path state = checkpoint::tp_path(checkpoint::optimizer_state_path(out), tp.rank, tp.size);
  if (m.options().lora.enabled()) {   // the adapters alone, naming their base
    if (write) checkpoint::save_adapters(m, weights, info.base, info);
    save_optimizer_state(opt, m, state, info, write);
    return {weights, state};
  }
  checkpoint::require_finite_weights(m, weights, info.step);
  save_optimizer_state(opt, m, state, info, write);
  // Data parallel with bf16 weights: the whole f32 master on the writer, gathered only
  // now, so that it and the whole moments are never held at once.
  opt.gather_masters(0);
  if (write) checkpoint::save_weights(m, weights, info);
  return {weights, state};
}

void remove_other_layouts(const std::filesystem::path& out, const std::vector<std::filesystem::path>& written) {
  for (const auto& name : {out, checkpoint::optimizer_state_path(out)}) {
    for (const auto& gone : checkpoint::remove_other_layouts(name, written)) {
      log::info("removed {}: an earlier checkpoint of another layout under the same name", gone.string());
    }
  }
}

bool checkpoint_complete(const std::filesystem::path& out, std::int64_t step) {
  try {
    const io::WeightShardSet weights(checkpoint::checkpoint_files(out));
    const io::WeightShardSet state(checkpoint::checkpoint_files(checkpoint::optimizer_state_path(out)));
    return weights.shards().front().meta().step == step && state.shards().front().meta().kind == "optimizer";
  } catch (const InputError&) {
    return false;  // missing, unfinished or foreign: written anew
  }
}

json train_stats_json(double wall_seconds, std::int64_t sequences, std::int64_t tokens,
                      std::span<const CallRecord> calls) {
  json doc = io::stage_stats_head<json>("train", wall_seconds, sequences, tokens);
  json out_calls = json::object();
  for (const CallRecord& c : calls) {
    json call;
    call["seconds"] = c.seconds;
    call["tokens"] = c.tokens;
    call["tokens_per_second"] = c.seconds > 0 ? double(c.tokens) / c.seconds : 0.0;
    call["steps"] = c.steps.size();
    json per_step = json::array();
    std::map<std::string, double> mean;
    const double n = c.steps.empty() ? 1.0 : double(c.steps.size());
    for (const StepStats& s : c.steps) {
      json j = {{"loss", s.loss}, {"grad_norm", s.grad_norm}, {"lr", s.lr}, {"tokens", s.tokens},
                {"sequences", s.sequences}, {"micro_batches", s.micro_batches}, {"seconds", s.seconds}};
      for (const auto& [k, v] : s.metrics) j[k] = v;
      per_step.push_back(std::move(j));
      mean["loss"] += s.loss / n;
      mean["grad_norm"] += s.grad_norm / n;
      for (const auto& [k, v] : s.metrics) mean[k] += v / n;
    }
    for (const auto& [k, v] : mean) call[k] = v;
    call["per_step"] = std::move(per_step);
    out_calls[c.call] = std::move(call);
  }
  doc["calls"] = std::move(out_calls);
  return doc;
}

}  // namespace braid::train
