// Tests for DgcCompressor ("dgc"): the count stays in its guaranteed band [ceil(0.8k), k] on
// normal, heavy-tailed and tied inputs and the output is a threshold set (no dropped |x| above a
// kept one). What dgc shares with redsync (fallback, validation, determinism, multi-level,
// rounding) is tested for both in sparse_selection_test.cc.
#include "kernels/cpu/dgc.h"

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

TEST(DgcCompressorTest, CountInBandAndThresholdProperty) {
  ThreadPool pool(2);
  DgcCompressor dgc({ValueType::kFloat32, &pool});
  EXPECT_EQ(dgc.name(), "dgc");
  for (int64_t n : {1009, 65537, (1 << 20) + 7}) {
    for (Dist dist : {Dist::kNormal, Dist::kLaplace, Dist::kCauchy, Dist::kTies}) {
      const std::vector<float> x = Make(dist, n, 31 + n);
      for (double theta : {2.0, 10.0, 100.0, 1000.0}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " ", Name(dist), " theta=", theta));
        Compressed out;
        ASSERT_THAT(dgc.Compress(x, theta, {"w"}, &out), IsOk());
        const int64_t k = KeepCount(n, theta);
        EXPECT_GE(out.count(), static_cast<int64_t>(std::ceil(0.8 * k)));
        EXPECT_LE(out.count(), k);
        EXPECT_EQ(out.dense_size, n);
        EXPECT_FALSE(out.dense);
        ExpectThresholdSet(x, out);
        if (dist != Dist::kTies && n > 100000) {  // continuous data: converges, one pass
          EXPECT_FALSE(dgc.last_stats().fallback);
          EXPECT_EQ(dgc.last_stats().full_passes, 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gravac::kernels::cpu
