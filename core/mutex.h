// Mutex, MutexLock, CondVar: std::mutex and std::condition_variable under clang's thread-safety
// annotations, so -Wthread-safety checks what they guard (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_
// REQUIRED) as it does for absl::Mutex. The calls mirror absl::Mutex / absl::MutexLock /
// absl::CondVar.
//
//   Mutex mu_;
//   CondVar cv_;
//   bool ready_ ABSL_GUARDED_BY(mu_) = false;
//   ...
//   MutexLock lock(&mu_);
//   while (!ready_) cv_.Wait(&mu_);   // a loop, not a predicate lambda: the analysis does not
//                                     // see that a lambda runs under the lock
//
// Why not absl::Mutex: Debian's prebuilt abseil is not compiled with TSan, so TSan sees neither
// its Lock nor its Unlock and reports every access it guards as a race. std::mutex is a pthread
// mutex, which TSan intercepts. The classes TSan runs (scripts/sanitize.sh: the engine, the
// worker server, the transports, the thread pool, the client) use this Mutex; the controller and
// gravacd, which TSan does not run, use absl::Mutex directly.
//
// Thread-safety: as std::mutex and std::condition_variable.
#ifndef GRAVAC_CORE_MUTEX_H_
#define GRAVAC_CORE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gravac {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis that the caller holds the lock (it checks nothing at run time).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Waits release `mu` while they block and hold it again when they return; they may wake without
// a Signal, so callers wait in a loop on their condition.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns true when it returned because `timeout` passed.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (timeout == absl::InfiniteDuration()) {  // std::chrono would overflow adding it to now
      Wait(mu);
      return false;
    }
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool timed_out =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  // Returns true when it returned because `deadline` (absl::Now() time) passed.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitWithTimeout(mu, deadline - absl::Now());
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gravac

#endif  // GRAVAC_CORE_MUTEX_H_
