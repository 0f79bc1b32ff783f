#include "controller/policy/throughput_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Ranked = ThroughputTable::Ranked;

TEST(ThroughputTableTest, KeepsTheMeanOfEveryStep) {
  ThroughputTable t;
  for (double v : {100.0, 300.0, 200.0}) t.Add(20.0, v);
  const ThroughputTable::Entry* e = t.Find(20.0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->samples, 3);
  EXPECT_DOUBLE_EQ(e->sum, 600.0);
  EXPECT_DOUBLE_EQ(e->mean(), 200.0);
  EXPECT_EQ(t.Find(40.0), nullptr);
}

TEST(ThroughputTableTest, OnlyCompletedPeriodsAreRanked) {
  ThroughputTable t;
  t.Add(10.0, 100.0);
  t.Add(20.0, 500.0);
  EXPECT_THAT(t.Best(2), IsEmpty());
  t.MarkPeriodComplete(10.0);
  EXPECT_THAT(t.Best(2), ElementsAre(Ranked{10.0, 100.0, 1}));
  t.MarkPeriodComplete(20.0);
  EXPECT_THAT(t.Best(2), ElementsAre(Ranked{20.0, 500.0, 1}, Ranked{10.0, 100.0, 1}));
}

TEST(ThroughputTableTest, ThetaWithoutSamplesIsNotRanked) {
  ThroughputTable t;
  t.Add(10.0, 100.0);
  t.MarkPeriodComplete(10.0);
  t.MarkPeriodComplete(20.0);  // its gain never reached ε: measured nothing
  EXPECT_THAT(t.Best(2), ElementsAre(Ranked{10.0, 100.0, 1}));
  ASSERT_NE(t.Find(20.0), nullptr);
  EXPECT_TRUE(t.Find(20.0)->period_complete);
}

// Reference bug: dense could "win" the search and then go through the sparse allgather.
TEST(ThroughputTableTest, DenseIsRecordedButNeverRanked) {
  ThroughputTable t;
  t.Add(ThroughputTable::kDense, 1e9);
  t.MarkPeriodComplete(ThroughputTable::kDense);
  t.Add(10.0, 1.0);
  t.MarkPeriodComplete(10.0);
  t.Add(20.0, 2.0);
  t.MarkPeriodComplete(20.0);
  EXPECT_THAT(t.Best(-1), ElementsAre(Ranked{20.0, 2.0, 1}, Ranked{10.0, 1.0, 1}));
  ASSERT_NE(t.Find(1.0), nullptr);
  EXPECT_DOUBLE_EQ(t.Find(1.0)->mean(), 1e9);
}

// Reference bug: CT held one noisy step per θ. A single spike must not outrank a better mean.
TEST(ThroughputTableTest, RanksByMeanNotByLastStep) {
  ThroughputTable t;
  for (int i = 0; i < 9; ++i) t.Add(10.0, 100.0);
  t.Add(10.0, 1000.0);  // last step spikes: mean 190
  for (int i = 0; i < 9; ++i) t.Add(20.0, 300.0);
  t.Add(20.0, 10.0);  // last step dips: mean 271
  t.MarkPeriodComplete(10.0);
  t.MarkPeriodComplete(20.0);
  EXPECT_THAT(t.Best(2), ElementsAre(Ranked{20.0, 271.0, 10}, Ranked{10.0, 190.0, 10}));
}

TEST(ThroughputTableTest, TiesPreferMoreCompression) {
  ThroughputTable t;
  for (double theta : {10.0, 40.0, 20.0}) {
    t.Add(theta, 50.0);
    t.MarkPeriodComplete(theta);
  }
  EXPECT_THAT(t.Best(3),
              ElementsAre(Ranked{40.0, 50.0, 1}, Ranked{20.0, 50.0, 1}, Ranked{10.0, 50.0, 1}));
  EXPECT_THAT(t.Best(1), ElementsAre(Ranked{40.0, 50.0, 1}));
  EXPECT_THAT(t.Best(0), IsEmpty());
}

}  // namespace
}  // namespace gravac::policy
