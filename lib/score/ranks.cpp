#include "score/ranks.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "io/sample_shard.hpp"
#include "score/shard_stream.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <thread>

namespace braid::score {
namespace {

constexpr int kTagStatsLength = 21;
constexpr int kTagStats = 22;
constexpr int kTagRelease = 23;

// Union-find over inputs joined by a shared group.
std::size_t root_of(std::vector<std::size_t>& parent, std::size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::vector<std::vector<std::size_t>> score_units(std::span<const std::vector<std::int64_t>> sample_ids,
                                                  std::int64_t samples_per_prompt) {
  const std::size_t n = sample_ids.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  if (samples_per_prompt > 0) {
    std::map<std::int64_t, std::size_t> first_holder;  // group -> the first input holding it
    for (std::size_t i = 0; i < n; ++i) {
      for (std::int64_t id : sample_ids[i]) {
        const auto [it, fresh] = first_holder.emplace(id / samples_per_prompt, i);
        if (!fresh) parent[root_of(parent, i)] = root_of(parent, it->second);
      }
    }
  }
  std::vector<std::vector<std::size_t>> units;
  std::map<std::size_t, std::size_t> unit_of_root;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [it, fresh] = unit_of_root.emplace(root_of(parent, i), units.size());
    if (fresh) units.emplace_back();
    units[it->second].push_back(i);
  }
  return units;
}

std::vector<int> deal_units(const std::vector<std::vector<std::size_t>>& units, std::span<const std::int64_t> sequences,
                            int ranks) {
  std::vector<std::int64_t> load(static_cast<std::size_t>(ranks), 0);
  std::vector<int> owner;
  for (const auto& unit : units) {
    const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner.push_back(static_cast<int>(r));
    for (std::size_t i : unit) load[r] += std::max<std::int64_t>(sequences[i], 1);
  }
  return owner;
}

std::vector<std::string> inputs_of_rank(const CommandOptions& o, const ScoreSettings& settings, int rank, int ranks) {
  std::map<std::filesystem::path, std::string> outputs;
  for (const auto& in : o.inputs) {
    const auto out = output_path(o.out_dir, in, o.prefix);
    if (auto [it, fresh] = outputs.emplace(out, in); !fresh) {
      throw InputError(in, "", fmt::format("its output {} is already the output of {} (inputs need distinct names)",
                                           out.string(), it->second));
    }
  }
  std::vector<std::int64_t> sequences;
  std::vector<std::vector<std::int64_t>> ids(o.inputs.size());
  std::int64_t group = 0;
  if (settings.grouped()) group = o.samples_per_prompt;
  for (std::size_t i = 0; i < o.inputs.size(); ++i) {
    if (!settings.grouped()) {
      sequences.push_back(io::probe_sample_shard(o.inputs[i]).sequences);
      continue;
    }
    const io::SampleShard s = io::read_sample_shard(o.inputs[i]);
    sequences.push_back(static_cast<std::int64_t>(s.batch.size()));
    ids[i] = s.batch.sample_id;
    if (group <= 0) group = samples_per_prompt_in_config(s.meta.config);
    if (group <= 0) {
      throw InputError(o.inputs[i], "attribute config",
                       "has no samples_per_prompt (GRPO groups samples by prompt, and under mpirun the ranks split "
                       "the shards by group): pass --samples-per-prompt N");
    }
  }
  const auto units = score_units(ids, group);
  const auto owner = deal_units(units, sequences, ranks);
  std::vector<std::size_t> mine;
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (owner[u] == rank) mine.insert(mine.end(), units[u].begin(), units[u].end());
  }
  std::sort(mine.begin(), mine.end());
  std::vector<std::string> out;
  for (std::size_t i : mine) out.push_back(o.inputs[i]);
  return out;
}

std::vector<std::string> gather_on_root(comm::Communicator& world, const std::string& mine, int root) {
  if (world.rank() != root) {
    const std::int64_t n = static_cast<std::int64_t>(mine.size());
    comm::Request size = world.isend(std::span<const std::int64_t>(&n, 1), root, kTagStatsLength);
    comm::Request data = world.isend(std::span<const char>(mine.data(), mine.size()), root, kTagStats);
    comm::wait_asleep(size);
    comm::wait_asleep(data);
    return {};
  }
  std::vector<std::string> all(static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) {
    if (r == root) {
      all[static_cast<std::size_t>(r)] = mine;
      continue;
    }
    std::int64_t n = 0;
    comm::Request size = world.irecv(std::span<std::int64_t>(&n, 1), r, kTagStatsLength);
    comm::wait_asleep(size);
    std::string& text = all[static_cast<std::size_t>(r)];
    text.assign(static_cast<std::size_t>(n), '\0');
    comm::Request data = world.irecv(std::span<char>(text.data(), text.size()), r, kTagStats);
    comm::wait_asleep(data);
  }
  return all;
}

void release_from_root(comm::Communicator& world, int root) { comm::release_from(world, root, kTagRelease); }

}  // namespace braid::score
