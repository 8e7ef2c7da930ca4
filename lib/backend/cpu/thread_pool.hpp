// The CPU backend's worker threads. Not OpenMP: libgomp's workers busy-wait between
// parallel regions (OMP_WAIT_POLICY can only be set before the process starts), and on
// a machine shared with other jobs a busy-waiting barrier can cost a whole scheduler
// time slice per region: decode steps ran 25× slower on 2 threads than on 1. These
// workers spin briefly, then sleep on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace braid::backend::cpu {

class ThreadPool {
 public:
  using Body = std::function<void(std::int64_t begin, std::int64_t end)>;
  static constexpr int kMaxThreads = 1024;

  // UsageError (exit 2) for more than kMaxThreads, or when the system cannot start them
  // all (a memory or process limit): the threads started are stopped first.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  // Calls body(begin, end) over [0, n) in chunks of `grain`, on the caller and the workers;
  // returns when every chunk is done. Runs inline when there is one chunk, one thread, or
  // when called from inside a running job (or while another thread's job runs).
  void run(std::int64_t n, std::int64_t grain, const Body& body);

 private:
  // One call of run(): workers that wake late hold it and find no chunk left; the body is
  // only called for a claimed chunk, and run() returns only when every chunk is done.
  struct Job {
    const Body* body = nullptr;
    std::int64_t n = 0, grain = 1, chunks = 0;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> remaining{0};
  };

  void work(Job& job);
  void worker_loop();
  void stop_workers();

  std::vector<std::thread> workers_;
  std::mutex job_mu_;                 // one job at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<std::uint64_t> generation_{0};
  bool stop_ = false;
  std::shared_ptr<Job> job_;
};

// The process's pool (CpuBackend sizes it).
ThreadPool& pool();
void set_pool_threads(int threads);

// pool().run(n, grain, body) with grain >= 1.
inline void parallel_for(std::int64_t n, std::int64_t grain, const ThreadPool::Body& body) {
  pool().run(n, grain < 1 ? 1 : grain, body);
}

}  // namespace braid::backend::cpu
