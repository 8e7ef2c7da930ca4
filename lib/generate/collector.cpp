#include "generate/collector.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace braid::gen {

ShardCollector::ShardCollector(ShardPlan plan, io::SampleShardMeta meta, Written on_written,
                               std::vector<io::PromptOrigin> origins)
    : plan_(std::move(plan)), meta_(std::move(meta)), on_written_(std::move(on_written)), origins_(std::move(origins)),
      writer_([this] { write_loop(); }) {}

ShardCollector::~ShardCollector() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

void ShardCollector::write_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left to write
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failed;
    try {
      io::write_sample_shard(job.path, job.batch, meta_);
      on_written_(job.path, job.batch);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (failed && !error_) error_ = failed;
    if (!failed) ++shards_written_;
    cv_.notify_all();
  }
}

void ShardCollector::rethrow_error() {
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void ShardCollector::expect(std::int64_t shard) { open_.try_emplace(shard); }

void ShardCollector::add(Sample&& s) {
  rethrow_error();
  const std::int64_t shard = plan_.shard_of(static_cast<std::int64_t>(s.sample_id));
  const auto it = open_.find(shard);
  if (it == open_.end()) throw std::logic_error(fmt::format("sample {} belongs to shard {}, not written here", s.sample_id, shard));
  it->second.push_back(std::move(s));
  if (static_cast<std::int64_t>(it->second.size()) < plan_.size_of(shard)) return;
  if (drop_) {
    open_.erase(it);
    return;
  }
  Job job{plan_.path(shard), shard_batch(it->second, origins_)};
  open_.erase(it);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
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

void ShardCollector::flush() {
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || error_; });
  }
  rethrow_error();
}

std::int64_t ShardCollector::shards_written() const {
  std::lock_guard lock(mu_);
  return shards_written_;
}

}  // namespace braid::gen
