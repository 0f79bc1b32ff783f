#include "core/thread_pool.h"

#include <algorithm>

namespace gravac {
namespace {

thread_local bool in_parallel_for = false;

// Bounds of chunk `i` of `chunks` over [0, n).
void ChunkBounds(int64_t n, int chunks, int i, int64_t* begin, int64_t* end) {
  int64_t base = n / chunks, extra = n % chunks;
  *begin = i * base + std::min<int64_t>(i, extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}

}  // namespace

ThreadPool::ThreadPool(int num_lanes) {
  if (num_lanes <= 0) num_lanes = std::max(1u, std::thread::hardware_concurrency());
  for (int lane = 1; lane < num_lanes; ++lane) {
    workers_.emplace_back([this, lane] { WorkerLoop(lane); });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  start_cv_.SignalAll();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::NumChunks(int64_t n, int64_t min_grain) const {
  if (n <= 0) return 0;
  int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(1, min_grain));
  return static_cast<int>(std::min<int64_t>(size(), by_grain));
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_grain, const Body& body) {
  if (n <= 0) return;
  int chunks = NumChunks(n, min_grain);
  if (chunks == 1 || in_parallel_for) {
    body(0, 0, n);
    return;
  }
  MutexLock call_lock(&call_mu_);
  {
    MutexLock lock(&mu_);
    body_ = &body;
    n_ = n;
    chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  start_cv_.SignalAll();
  int64_t begin, end;
  ChunkBounds(n, chunks, 0, &begin, &end);
  in_parallel_for = true;
  body(0, begin, end);
  in_parallel_for = false;
  MutexLock lock(&mu_);
  while (pending_ != 0) done_cv_.Wait(&mu_);
  body_ = nullptr;
}

void ThreadPool::WorkerLoop(int lane) {
  uint64_t seen = 0;
  in_parallel_for = true;
  for (;;) {
    const Body* body;
    int64_t n;
    int chunks;
    {
      MutexLock lock(&mu_);
      while (!stop_ && generation_ == seen) start_cv_.Wait(&mu_);
      if (stop_) return;
      seen = generation_;
      body = body_;
      n = n_;
      chunks = chunks_;
    }
    if (lane < chunks) {
      int64_t begin, end;
      ChunkBounds(n, chunks, lane, &begin, &end);
      (*body)(lane, begin, end);
      MutexLock lock(&mu_);
      if (--pending_ == 0) done_cv_.Signal();
    }
  }
}

}  // namespace gravac
