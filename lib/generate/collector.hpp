// Finished samples gathered into their shards (shard_plan.hpp): a shard is written,
// atomically, the moment its last sample arrives, and its path is reported at once.
#pragma once

#include "generate/shard_plan.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

namespace braid::gen {

class ShardCollector {
 public:
  using Written = std::function<void(const std::filesystem::path&, const io::SampleBatch&)>;
  ShardCollector(ShardPlan plan, io::SampleShardMeta meta, Written on_written);

  // This process writes `shard`: its samples will come through add().
  void expect(std::int64_t shard);
  // A finished sample of an expected shard; writes the shard when it is the last one.
  void add(Sample&& s);
  // Shards expected and not yet written, ascending.
  std::vector<std::int64_t> open_shards() const;
  // Gives up an open shard (to another process): its finished samples so far.
  std::vector<Sample> release(std::int64_t shard);

  std::int64_t shards_written() const { return shards_written_; }

 private:
  ShardPlan plan_;
  io::SampleShardMeta meta_;
  Written on_written_;
  std::map<std::int64_t, std::vector<Sample>> open_;
  std::int64_t shards_written_ = 0;
};

}  // namespace braid::gen
