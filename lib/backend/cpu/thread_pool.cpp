#include "backend/cpu/thread_pool.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

namespace braid::backend::cpu {
namespace {

thread_local bool in_job = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> p = std::make_unique<ThreadPool>(1);
  return p;
}

constexpr int kSpins = 2000;  // some microseconds of pause before sleeping

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads > kMaxThreads) {
    throw UsageError(fmt::format("--threads {}: at most {} CPU threads", threads, kMaxThreads));
  }
  try {
    workers_.reserve(static_cast<std::size_t>(std::max(threads - 1, 0)));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    // The workers started wait on wake_: they must be stopped and joined before the
    // members go (destroying a condition variable with waiters blocks forever).
    const std::size_t started = workers_.size();
    stop_workers();
    throw UsageError(fmt::format("--threads {}: only {} threads could be started ({}); ask for fewer", threads,
                                 started + 1, e.what()));
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::work(Job& job) {
  in_job = true;
  for (;;) {
    const std::int64_t b = job.next.fetch_add(job.grain, std::memory_order_relaxed);
    if (b >= job.n) break;
    (*job.body)(b, std::min(job.n, b + job.grain));
    if (job.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_all();
    }
  }
  in_job = false;
}

void ThreadPool::run(std::int64_t n, std::int64_t grain, const Body& body) {
  if (n <= 0) return;
  if (workers_.empty() || n <= grain || in_job) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> exclusive(job_mu_, std::try_to_lock);
  if (!exclusive.owns_lock()) {  // another thread's job is running: do ours alone
    body(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->n = n;
  job->grain = grain;
  job->chunks = (n + grain - 1) / grain;
  job->remaining.store(job->chunks, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work(*job);
  for (int i = 0; i < kSpins && job->remaining.load(std::memory_order_acquire) > 0; ++i) cpu_relax();
  if (job->remaining.load(std::memory_order_acquire) > 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return job->remaining.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen; ++i) cpu_relax();
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      job = job_;
    }
    if (job) work(*job);
  }
}

ThreadPool& pool() { return *pool_slot(); }

void set_pool_threads(int threads) {
  auto& p = pool_slot();
  if (p->threads() != threads) p = std::make_unique<ThreadPool>(threads);
}

}  // namespace braid::backend::cpu
