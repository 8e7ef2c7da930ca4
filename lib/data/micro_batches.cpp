#include "data/micro_batches.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace braid::data {

std::vector<MicroBatch> pack_micro_batches(std::span<const std::int64_t> offsets, std::int64_t micro_tokens) {
  if (micro_tokens <= 0) throw std::invalid_argument("pack_micro_batches: micro_tokens must be positive");
  std::vector<std::size_t> kept;
  std::vector<std::int64_t> lengths;
  for (std::size_t s = 0; s + 1 < offsets.size(); ++s) {
    const std::int64_t len = offsets[s + 1] - offsets[s];
    if (len <= 0) continue;
    kept.push_back(s);
    lengths.push_back(len);
  }
  std::vector<MicroBatch> out;
  std::size_t first = 0;
  for (std::size_t end : greedy_runs(lengths, micro_tokens)) {
    MicroBatch& mb = out.emplace_back();
    for (std::size_t k = first; k < end; ++k) {
      mb.sequences.push_back(kept[k]);
      mb.tokens += lengths[k];
    }
    first = end;
  }
  return out;
}

io::SampleBatch select_sequences(const io::SampleBatch& b, std::span<const std::size_t> indices) {
  io::SampleBatch out;
  if (b.reward) out.reward.emplace();
  for (const auto& f : io::token_array_fields()) {
    if (b.*f.member) (out.*f.member).emplace();
  }
  for (std::size_t i : indices) {
    if (i >= b.size()) throw std::out_of_range(fmt::format("select_sequences: index {} of {} sequences", i, b.size()));
    const auto seq = b.sequence(i);
    out.tokens.insert(out.tokens.end(), seq.begin(), seq.end());
    out.offsets.push_back(static_cast<std::int64_t>(out.tokens.size()));
    out.prompt_len.push_back(b.prompt_len[i]);
    out.sample_id.push_back(b.sample_id[i]);
    if (b.reward) out.reward->push_back((*b.reward)[i]);
    for (const auto& f : io::token_array_fields()) {
      const auto& src = b.*f.member;
      if (!src) continue;
      auto& dst = *(out.*f.member);
      dst.insert(dst.end(), src->begin() + b.offsets[i], src->begin() + b.offsets[i + 1]);
    }
  }
  return out;
}

namespace {

void check_groups(std::span<const std::size_t> indices, std::size_t group) {
  if (group == 0 || indices.size() % group != 0) {
    throw UsageError(fmt::format("{} sequences do not split into groups of {}", indices.size(), group));
  }
}

std::int64_t group_tokens(const io::SampleBatch& b, std::span<const std::size_t> indices, std::size_t g,
                          std::size_t group) {
  std::int64_t n = 0;
  for (std::size_t k = 0; k < group; ++k) n += static_cast<std::int64_t>(b.length(indices[g * group + k]));
  return n;
}

}  // namespace

std::vector<io::SampleBatch> micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                           const MicroBatchLimits& limits) {
  check_groups(indices, limits.group);
  const std::size_t groups = indices.size() / limits.group;
  std::vector<std::int64_t> tokens(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    tokens[g] = group_tokens(b, indices, g, limits.group);
    if (tokens[g] > limits.max_tokens) {
      throw UsageError(fmt::format("a sequence{} of {} tokens does not fit a micro-batch of {} tokens (raise --micro-tokens)",
                                   limits.group > 1 ? " group" : "", tokens[g], limits.max_tokens));
    }
    if (limits.max_sequences > 0 && static_cast<std::int64_t>(limits.group) > limits.max_sequences) {
      throw UsageError(fmt::format("groups of {} sequences do not fit micro-batches of {} sequences", limits.group,
                                   limits.max_sequences));
    }
  }
  const auto max_groups = limits.max_sequences / static_cast<std::int64_t>(limits.group);
  std::vector<io::SampleBatch> out;
  std::size_t first = 0;
  for (std::size_t end : greedy_runs(tokens, limits.max_tokens, max_groups)) {
    out.push_back(select_sequences(b, indices.subspan(first * limits.group, (end - first) * limits.group)));
    first = end;
  }
  return out;
}

std::vector<io::SampleBatch> split_micro_batches(const io::SampleBatch& b, std::span<const std::size_t> indices,
                                                 int count, std::size_t group) {
  check_groups(indices, group);
  const std::size_t groups = indices.size() / group;
  if (count < 1 || static_cast<std::size_t>(count) > groups) {
    throw UsageError(fmt::format("{} sequence groups cannot make {} micro-batches", groups, count));
  }
  std::vector<std::int64_t> prefix(groups + 1, 0);
  for (std::size_t g = 0; g < groups; ++g) prefix[g + 1] = prefix[g] + group_tokens(b, indices, g, group);
  // Cut k goes where the running token count first reaches k/count of the total, keeping
  // at least one group per micro-batch on each side.
  std::vector<io::SampleBatch> out;
  std::size_t first = 0;
  for (int k = 1; k <= count; ++k) {
    std::size_t end = groups;
    if (k < count) {
      const double target = double(prefix[groups]) * k / count;
      end = first + 1;
      while (end < groups - static_cast<std::size_t>(count - k) && double(prefix[end]) < target) ++end;
      // The cut before or after the target, whichever is nearer.
      if (end > first + 1 && target - double(prefix[end - 1]) < double(prefix[end]) - target) --end;
    }
    out.push_back(select_sequences(b, indices.subspan(first * group, (end - first) * group)));
    first = end;
  }
  return out;
}

}  // namespace braid::data
