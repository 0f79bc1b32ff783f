// Tests for RedSyncCompressor ("redsync"): k <= count < 2k on normal, heavy-tailed and tied
// inputs, the output is a threshold set (no dropped |x| above a kept one), and k above
// #{|x| >= mean|x|} falls back to the exact top-k. What redsync shares with dgc (the all-equal
// fallback, validation, determinism, multi-level, rounding) is tested for both in
// sparse_selection_test.cc.
#include "kernels/cpu/redsync.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/cpu/threshold_test_util.h"

namespace gravac::kernels::cpu {
namespace {

using ::gravac::testing::IsOk;
using testing::Dist;
using testing::ExpectThresholdSet;
using testing::Make;
using testing::Name;
using testing::Oracle;

TEST(RedSyncCompressorTest, CountInBandAndThresholdProperty) {
  ThreadPool pool(2);
  RedSyncCompressor redsync({ValueType::kFloat32, &pool});
  EXPECT_EQ(redsync.name(), "redsync");
  for (int64_t n : {1009, 65537, (1 << 20) + 7}) {
    for (Dist dist : {Dist::kNormal, Dist::kLaplace, Dist::kCauchy, Dist::kTies}) {
      const std::vector<float> x = Make(dist, n, 31 + n);
      for (double theta : {2.0, 10.0, 100.0, 1000.0}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " ", Name(dist), " theta=", theta));
        Compressed out;
        ASSERT_THAT(redsync.Compress(x, theta, {"w"}, &out), IsOk());
        const int64_t k = KeepCount(n, theta);
        EXPECT_GE(out.count(), k);
        EXPECT_LT(out.count(), 2 * k);
        EXPECT_EQ(out.dense_size, n);
        EXPECT_FALSE(out.dense);
        ExpectThresholdSet(x, out);
        // Cauchy's mean|x| is large: at θ = 10 fewer than k lie above it, so only normal and
        // Laplace data are sure to converge.
        if ((dist == Dist::kNormal || dist == Dist::kLaplace) && n > 100000 && theta >= 10.0) {
          EXPECT_FALSE(redsync.last_stats().fallback);
          EXPECT_EQ(redsync.last_stats().full_passes, 1);
        }
      }
    }
  }
}

TEST(RedSyncCompressorTest, KAboveCountAtMeanFallsBackToExactTopK) {
  // For a normal tensor about 58% of |x| lie at or above mean|x|, so with θ = 1.25 (k = 80%)
  // no threshold in [mean, max] reaches k: the search cannot converge.
  ThreadPool pool(2);
  RedSyncCompressor redsync({ValueType::kFloat32, &pool});
  for (int64_t n : {4099, (1 << 20) + 3}) {
    const std::vector<float> x = Make(Dist::kNormal, n, 12);
    Compressed out;
    ASSERT_THAT(redsync.Compress(x, 1.25, {"w"}, &out), IsOk());
    EXPECT_TRUE(redsync.last_stats().fallback);
    EXPECT_EQ(out.indices, Oracle(x, KeepCount(n, 1.25)));
  }
}

}  // namespace
}  // namespace gravac::kernels::cpu
