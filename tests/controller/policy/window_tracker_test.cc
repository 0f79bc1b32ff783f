#include "controller/policy/window_tracker.h"

#include <cmath>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(WindowTrackerTest, SpecCheckValue) {
  ASSERT_OK_AND_ASSIGN(WindowTracker t, WindowTracker::Create(25, 0.05));
  for (int x = 1; x <= 25; ++x) t.Add(x);
  ASSERT_TRUE(t.full());
  EXPECT_NEAR(t.Value(), 15.596788, 1e-6);
}

TEST(WindowTrackerTest, ZeroUntilFull) {
  WindowTracker t(4, 0.1);
  for (int i = 0; i < 3; ++i) {
    t.Add(7.0);
    EXPECT_FALSE(t.full());
    EXPECT_EQ(t.size(), i + 1);
    EXPECT_EQ(t.Value(), 0.0);
  }
  t.Add(7.0);
  EXPECT_TRUE(t.full());
  EXPECT_DOUBLE_EQ(t.Value(), 7.0);
}

TEST(WindowTrackerTest, KeepsOnlyTheNewestWindow) {
  // After 1..40 a W=25 tracker holds 16..40: the same weights on inputs shifted by 15.
  WindowTracker t(25, 0.05);
  for (int x = 1; x <= 40; ++x) t.Add(x);
  EXPECT_NEAR(t.Value(), 15.596788 + 15.0, 1e-6);
  EXPECT_EQ(t.size(), 25);
}

TEST(WindowTrackerTest, NewestSampleWeighsMost) {
  // W=2, α=0.5: weights 1 (newest) and 0.5 → (1·b + 0.5·a) / 1.5.
  WindowTracker t(2, 0.5);
  t.Add(3.0);
  t.Add(6.0);
  EXPECT_DOUBLE_EQ(t.Value(), (6.0 + 0.5 * 3.0) / 1.5);
  t.Add(0.0);  // now holds 6 (older), 0 (newest)
  EXPECT_DOUBLE_EQ(t.Value(), (0.0 + 0.5 * 6.0) / 1.5);
}

TEST(WindowTrackerTest, AlphaZeroIsThePlainMean) {
  WindowTracker t(5, 0.0);
  for (double x : {1.0, 2.0, 3.0, 4.0, 10.0}) t.Add(x);
  EXPECT_DOUBLE_EQ(t.Value(), 4.0);
}

TEST(WindowTrackerTest, WindowOfOneIsTheLastSample) {
  WindowTracker t(1, 0.3);
  t.Add(2.5);
  EXPECT_DOUBLE_EQ(t.Value(), 2.5);
  t.Add(-1.0);
  EXPECT_DOUBLE_EQ(t.Value(), -1.0);
}

TEST(WindowTrackerTest, ResetEmptiesTheWindow) {
  WindowTracker t(3, 0.05);
  for (int i = 0; i < 5; ++i) t.Add(100.0);
  t.Reset();
  EXPECT_FALSE(t.full());
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(t.Value(), 0.0);
  // Old samples do not leak into the refilled window.
  for (double x : {1.0, 1.0, 1.0}) t.Add(x);
  EXPECT_DOUBLE_EQ(t.Value(), 1.0);
}

TEST(WindowTrackerTest, RejectsBadParameters) {
  EXPECT_THAT(WindowTracker::Create(0, 0.05),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("W = 0")));
  EXPECT_THAT(WindowTracker::Create(25, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alpha")));
  EXPECT_THAT(WindowTracker::Create(25, -0.1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WindowTracker::Create(25, std::nan("")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WindowTracker::ValidateParams(1, 0.0), IsOk());
  EXPECT_THAT(WindowTracker::ValidateParams(25, 0.999), IsOk());
}

}  // namespace
}  // namespace gravac::policy
