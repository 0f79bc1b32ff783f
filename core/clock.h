// Clock: where a component reads the time and waits for a deadline, so a test can move time by
// hand instead of sleeping (the Coordinator takes `now` as an argument for the same reason).
//
//   RealClock()       absl::Now(); a wait for a deadline blocks until it, exactly
//   ManualClock       a time that moves only by Advance/Set; waits for a deadline on it read the
//                     time again every RecheckEvery() of real time, so they end within a
//                     millisecond of the Advance that passes their deadline
//
// A component takes a `const Clock*` in its options (nullptr = RealClock()) and waits with
// AwaitUntil, which ends on the condition or on the clock's deadline, whichever comes first.
// Durations that are only measured (metrics, logs) stay on absl::Now(); timers a network library
// keeps (gRPC deadlines, keepalive pings) run on real time whatever the clock.
//
// Thread-safety: both clocks are safe from any thread; RealClock() is stateless.
#ifndef GRAVAC_CORE_CLOCK_H_
#define GRAVAC_CORE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gravac {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // The longest a wait for a deadline on this clock blocks in real time before it reads Now()
  // again: infinite for the real clock, a millisecond for a ManualClock.
  virtual absl::Duration RecheckEvery() const = 0;
};

// absl::Now().
const Clock& RealClock();

// `clock` when it is set, else RealClock(): what a component does with its options' clock.
inline const Clock& ClockOr(const Clock* clock) { return clock != nullptr ? *clock : RealClock(); }

class ManualClock : public Clock {
 public:
  // Starts at `start` (a fixed time, so runs are alike).
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}

  absl::Time Now() const override;
  absl::Duration RecheckEvery() const override { return absl::Milliseconds(1); }

  // Moves the time forward by `d` (>= 0).
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// Waits, holding `mu`, until `cond` holds or `clock` reaches `deadline`; returns whether `cond`
// holds. With the real clock this is mu.AwaitWithDeadline.
bool AwaitUntil(const Clock& clock, absl::Mutex& mu, const absl::Condition& cond,
                absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

}  // namespace gravac

#endif  // GRAVAC_CORE_CLOCK_H_
