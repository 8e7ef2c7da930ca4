#include "train/train_outputs.hpp"

#include "checkpoint/adapters.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "train/optimizer_state.hpp"
#include "io/fingerprint.hpp"
#include "io/stage_stats.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <system_error>

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
  if (m.options().lora.enabled()) {
    // The adapters alone, naming their base: whole at any tp (tp rank 0 writes what the
    // group gathers), beside the optimizer state of this rank's slices.
    save_optimizer_state(opt, m, state, info, write);
    checkpoint::save_adapters(m, out, info.base, info, write);
    return {out, state};
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

namespace {

// The files of a checkpoint spec, or none when it is not there.
std::vector<std::filesystem::path> files_or_none(const std::filesystem::path& spec) {
  return checkpoint::checkpoint_exists(spec) ? checkpoint::checkpoint_files(spec) : std::vector<std::filesystem::path>{};
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

}  // namespace

bool outputs_already_made(const std::vector<PlannedOutput>& outputs, const std::vector<std::filesystem::path>& inputs,
                          bool force) {
  bool all = true;
  for (const PlannedOutput& o : outputs) {
    const auto files = files_or_none(o.out);
    const bool in_place = std::any_of(files.begin(), files.end(), [&](const auto& f) {
      return std::any_of(inputs.begin(), inputs.end(), [&](const auto& in) {
        const auto in_files = files_or_none(in);
        return std::any_of(in_files.begin(), in_files.end(), [&](const auto& g) { return same_file(f, g); });
      });
    });
    if (files.empty() || in_place) {
      all = false;
      continue;
    }
    std::optional<ordered_json> there;
    std::int64_t step = 0;
    try {
      const io::WeightShardSet weights(files);
      const io::WeightShardSet state(checkpoint::checkpoint_files(checkpoint::optimizer_state_path(o.out)));
      if (state.shards().front().meta().kind != "optimizer") throw InputError(o.out.string(), "", "no optimizer state");
      const auto& first = weights.shards().front();
      step = first.meta().step;
      there = io::parse_made_from(first.meta().made_from, first.path().string());
    } catch (const InputError&) {
      all = false;   // missing, unfinished or damaged: written anew
      continue;
    }
    std::vector<std::string> diff;
    if (!there) {
      diff.push_back("it records nothing of what made it (a braid before records, or another tool)");
    } else {
      diff = io::made_from_differences(*there, o.made_from);
    }
    if (diff.empty()) continue;
    all = false;
    const std::string list = fmt::format("{}", fmt::join(diff, "; "));
    if (force) {
      log::info("{} (step {}) is trained again (--force): {}", o.out.string(), step, list);
      continue;
    }
    throw InputError(o.out.string(), "made_from",
                     fmt::format("is already there, made from other inputs or options: {}. --force trains it again "
                                 "(replacing it); or write to another output",
                                 list));
  }
  return all;
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
