#include "train/engine.hpp"

#include "core/error.hpp"
#include "core/rng.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace braid::train {

std::int64_t steps_per_call(std::size_t sequences, const LoopOptions& opt) {
  const std::size_t groups = sequences / std::max<std::size_t>(opt.group, 1);
  const std::size_t per_step = opt.mini_batch == 0 ? groups : std::max<std::size_t>(opt.mini_batch / opt.group, 1);
  if (groups == 0) return 0;
  return static_cast<std::int64_t>(opt.epochs) * static_cast<std::int64_t>((groups + per_step - 1) / per_step);
}

std::vector<CallRecord> train_epochs(const io::SampleBatch& batch, TrainingEngine& engine, const LoopOptions& opt,
                                     const std::function<void(const std::string&, const StepStats&)>& on_step) {
  const std::size_t group = std::max<std::size_t>(opt.group, 1);
  if (batch.size() % group != 0) {
    throw UsageError(fmt::format("{} sequences do not split into groups of {}", batch.size(), group));
  }
  if (opt.mini_batch != 0 && opt.mini_batch % group != 0) {
    throw UsageError(fmt::format("a mini-batch of {} sequences does not hold whole groups of {}", opt.mini_batch, group));
  }
  std::vector<CallRecord> records;
  for (const auto& call : engine.calls()) records.push_back({call, {}, 0, 0});
  const std::size_t groups = batch.size() / group;
  const std::size_t per_step = opt.mini_batch == 0 ? groups : opt.mini_batch / group;
  std::vector<std::size_t> order(groups);
  std::vector<std::size_t> indices;
  for (int e = 0; e < opt.epochs; ++e) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(opt.seed, static_cast<std::uint64_t>(e));
    rng.shuffle(std::span<std::size_t>(order));
    for (std::size_t first = 0; first < groups; first += per_step) {
      indices.clear();
      for (std::size_t g = first; g < std::min(groups, first + per_step); ++g) {
        for (std::size_t k = 0; k < group; ++k) indices.push_back(order[g] * group + k);
      }
      const std::vector<StepStats> stats = engine.step(batch, indices);
      for (std::size_t i = 0; i < records.size() && i < stats.size(); ++i) {
        records[i].steps.push_back(stats[i]);
        records[i].seconds += stats[i].seconds;
        records[i].tokens += stats[i].tokens;
        if (on_step) on_step(records[i].call, stats[i]);
      }
    }
  }
  return records;
}

}  // namespace braid::train
