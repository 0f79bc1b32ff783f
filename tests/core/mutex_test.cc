#include "core/mutex.h"

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

TEST(MutexTest, ExcludesConcurrentWriters) {
  Mutex mu;
  long count = 0;  // guarded by mu (a local: the annotation is for members)
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(&mu);
  EXPECT_EQ(count, 40000);
}

TEST(CondVarTest, WaitReturnsAfterSignalAllWithTheWriteVisible) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  int value = 0;
  std::thread setter([&] {
    MutexLock lock(&mu);
    value = 7;
    ready = true;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    while (!ready) cv.Wait(&mu);
    EXPECT_EQ(value, 7);
  }
  setter.join();
}

TEST(CondVarTest, TimedWaitsReportTheTimeout) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  absl::Time start = absl::Now();
  EXPECT_TRUE(cv.WaitWithTimeout(&mu, absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  EXPECT_TRUE(cv.WaitWithDeadline(&mu, absl::Now() + absl::Milliseconds(5)));
  // A deadline already passed returns at once.
  EXPECT_TRUE(cv.WaitWithDeadline(&mu, absl::Now() - absl::Seconds(1)));
}

TEST(CondVarTest, InfiniteTimeoutWaitsForTheSignal) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(10));
    MutexLock lock(&mu);
    ready = true;
    cv.Signal();
  });
  {
    MutexLock lock(&mu);
    while (!ready) EXPECT_FALSE(cv.WaitWithTimeout(&mu, absl::InfiniteDuration()));
  }
  setter.join();
}

}  // namespace
}  // namespace gravac
