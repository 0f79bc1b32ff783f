#include "core/clock.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

TEST(ClockTest, RealClockIsAbslNow) {
  const absl::Time before = absl::Now();
  const absl::Time t = RealClock().Now();
  EXPECT_GE(t, before);
  EXPECT_LE(t, absl::Now());
  EXPECT_EQ(&ClockOr(nullptr), &RealClock());
}

TEST(ClockTest, ManualClockMovesOnlyWhenAdvanced) {
  ManualClock clock;
  const absl::Time t0 = clock.Now();
  absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(3));
  clock.Advance(-absl::Seconds(1));  // time never goes back
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(3));
  EXPECT_EQ(&ClockOr(&clock), &clock);
}

TEST(ClockTest, AwaitUntilEndsOnTheCondition) {
  ManualClock clock;
  absl::Mutex mu;
  bool flag = false;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    absl::MutexLock lock(&mu);
    flag = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(AwaitUntil(clock, mu, absl::Condition(&flag), clock.Now() + absl::Hours(1)));
  }
  setter.join();
}

// A wait for a deadline on a ManualClock lasts until the clock passes the deadline, however long
// that takes in real time, and not beyond.
TEST(ClockTest, AwaitUntilAManualDeadlineEndsWhenTheClockPassesIt) {
  ManualClock clock;
  absl::Mutex mu;
  bool never = false;
  absl::Notification done;
  bool result = true;
  const absl::Time deadline = clock.Now() + absl::Seconds(10);
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = AwaitUntil(clock, mu, absl::Condition(&never), deadline);
    done.Notify();
  });
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
  EXPECT_FALSE(result);
}

TEST(ClockTest, AwaitUntilARealDeadlineTimesOut) {
  absl::Mutex mu;
  bool never = false;
  absl::MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(
      AwaitUntil(RealClock(), mu, absl::Condition(&never), start + absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
}

}  // namespace
}  // namespace gravac
