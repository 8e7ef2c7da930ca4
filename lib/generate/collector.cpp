#include "generate/collector.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace braid::gen {

ShardCollector::ShardCollector(ShardPlan plan, io::SampleShardMeta meta, Written on_written)
    : plan_(std::move(plan)), meta_(std::move(meta)), on_written_(std::move(on_written)) {}

void ShardCollector::expect(std::int64_t shard) { open_.try_emplace(shard); }

void ShardCollector::add(Sample&& s) {
  const std::int64_t shard = plan_.shard_of(static_cast<std::int64_t>(s.sample_id));
  const auto it = open_.find(shard);
  if (it == open_.end()) throw std::logic_error(fmt::format("sample {} belongs to shard {}, not written here", s.sample_id, shard));
  it->second.push_back(std::move(s));
  if (static_cast<std::int64_t>(it->second.size()) < plan_.size_of(shard)) return;
  const auto batch = shard_batch(it->second);
  const auto path = plan_.path(shard);
  io::write_sample_shard(path, batch, meta_);
  open_.erase(it);
  ++shards_written_;
  on_written_(path, batch);
}

std::vector<std::int64_t> ShardCollector::open_shards() const {
  std::vector<std::int64_t> out;
  for (const auto& [k, _] : open_) out.push_back(k);
  return out;
}

std::vector<Sample> ShardCollector::release(std::int64_t shard) {
  auto node = open_.extract(shard);
  if (node.empty()) return {};
  return std::move(node.mapped());
}

}  // namespace braid::gen
