// Finished samples gathered into their shards (shard_plan.hpp): a shard is queued
// for writing the moment its last sample arrives, and a writer thread writes it
// (atomically: temp file, fsync, rename) and reports its path. The generation loop
// never waits for a disk: an fsync'd HDF5 file costs milliseconds, a decode step of
// a small model about as much. Only the writer thread touches HDF5 while the
// collector lives (Debian's HDF5 is not thread-safe).
#pragma once

#include "generate/shard_plan.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace braid::gen {

class ShardCollector {
 public:
  // on_written runs on the writer thread, once per shard, after the file is in place.
  // origins (by sample id; may be empty) go into the shards (shard_batch).
  using Written = std::function<void(const std::filesystem::path&, const io::SampleBatch&)>;
  ShardCollector(ShardPlan plan, io::SampleShardMeta meta, Written on_written,
                 std::vector<io::PromptOrigin> origins = {});
  ~ShardCollector();  // waits for queued writes (errors then go unreported: call flush())
  ShardCollector(const ShardCollector&) = delete;
  ShardCollector& operator=(const ShardCollector&) = delete;

  // A tensor-parallel rank other than its group's first holds the same samples as the
  // first, which alone writes: from now on a complete shard is dropped, not written
  // (nor reported, nor counted).
  void drop_complete_shards() { drop_ = true; }

  // This process writes `shard`: its samples will come through add().
  void expect(std::int64_t shard);
  // A finished sample of an expected shard; queues the shard when it is the last one.
  // Rethrows an earlier write's error.
  void add(Sample&& s);
  // Shards expected and not yet complete, ascending.
  std::vector<std::int64_t> open_shards() const;
  // Gives up an open shard (to another process): its finished samples so far.
  std::vector<Sample> release(std::int64_t shard);
  // Waits until every queued shard is written; rethrows a write's error.
  void flush();

  std::int64_t shards_written() const;

 private:
  struct Job {
    std::filesystem::path path;
    io::SampleBatch batch;
  };
  void write_loop();
  void rethrow_error();

  ShardPlan plan_;
  io::SampleShardMeta meta_;
  Written on_written_;
  std::vector<io::PromptOrigin> origins_;
  std::map<std::int64_t, std::vector<Sample>> open_;
  bool drop_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::int64_t shards_written_ = 0;
  std::thread writer_;
};

}  // namespace braid::gen
