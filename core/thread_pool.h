// ThreadPool: a fixed set of worker threads that run data-parallel loops with the caller.
//
//   ThreadPool pool(2);                       // 2 lanes: the caller + 1 worker
//   pool.ParallelFor(n, 1 << 16, [&](int lane, int64_t begin, int64_t end) { ... });
//
// ParallelFor splits [0, n) into at most size() contiguous chunks in order (lane i gets the i-th
// chunk; chunks are at least `min_grain` long, so small loops run on the caller alone) and blocks
// until every chunk is done. The caller runs lane 0, so no thread is made per call.
//
// Thread-safety: ParallelFor may be called from several threads; calls are serialised. It must
// not be called from inside a ParallelFor body (that would deadlock) — such nested calls run the
// whole range on the calling lane instead.
#ifndef GRAVAC_CORE_THREAD_POOL_H_
#define GRAVAC_CORE_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/mutex.h"

namespace gravac {

class ThreadPool {
 public:
  using Body = std::function<void(int lane, int64_t begin, int64_t end)>;

  // num_lanes <= 0 means one lane per hardware thread.
  explicit ThreadPool(int num_lanes);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Number of chunks ParallelFor(n, min_grain, ...) will use; lanes >= that count are idle.
  int NumChunks(int64_t n, int64_t min_grain) const;

  void ParallelFor(int64_t n, int64_t min_grain, const Body& body);

 private:
  void WorkerLoop(int lane);

  std::vector<std::thread> workers_;
  Mutex call_mu_;  // serialises ParallelFor calls; taken before mu_

  Mutex mu_ ABSL_ACQUIRED_AFTER(call_mu_);
  CondVar start_cv_;
  CondVar done_cv_;
  const Body* body_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  int chunks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gravac

#endif  // GRAVAC_CORE_THREAD_POOL_H_
