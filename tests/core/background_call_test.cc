#include "core/background_call.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

TEST(BackgroundCallTest, WaitReturnsTheCallsStatusAndSeesItsWrites) {
  BackgroundCall call;
  int value = 0;
  call.Start([&value] {
    value = 42;
    return absl::UnavailableError("peer gone");
  });
  absl::Status s = call.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "peer gone");
  EXPECT_EQ(value, 42);
  // The status is consumed: a Wait without a new Start is OK.
  EXPECT_TRUE(call.Wait().ok());
}

TEST(BackgroundCallTest, RunsOnAnotherThreadWhileTheCallerWorks) {
  BackgroundCall call;
  std::atomic<bool> caller_done{false};
  std::atomic<bool> saw_caller_done{false};
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id runner;
  call.Start([&] {
    runner = std::this_thread::get_id();
    // Blocks until the caller, still running, says it finished its own work: proves overlap.
    while (!caller_done.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    saw_caller_done = true;
    return absl::OkStatus();
  });
  caller_done = true;
  EXPECT_TRUE(call.Wait().ok());
  EXPECT_TRUE(saw_caller_done.load());
  EXPECT_NE(runner, caller);
}

TEST(BackgroundCallTest, RunsManyCallsInOrder) {
  BackgroundCall call;
  int sum = 0;
  for (int i = 1; i <= 1000; ++i) {
    call.Start([&sum, i] {
      sum += i;
      return absl::OkStatus();
    });
    ASSERT_TRUE(call.Wait().ok());
  }
  EXPECT_EQ(sum, 500500);
}

TEST(BackgroundCallTest, StartWhilePendingIsRejectedAndRunsNothing) {
  BackgroundCall call;
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  call.Start([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    ++runs;
    return absl::OkStatus();
  });
  call.Start([&] {
    ++runs;
    return absl::OkStatus();
  });
  release = true;
  absl::Status s = call.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), testing::HasSubstr("pending"));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(call.Wait().ok());
}

TEST(BackgroundCallTest, DestructorWaitsForAPendingCall) {
  std::atomic<bool> finished{false};
  {
    BackgroundCall call;
    call.Start([&finished] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished = true;
      return absl::OkStatus();
    });
  }
  EXPECT_TRUE(finished.load());
}

}  // namespace
}  // namespace gravac
