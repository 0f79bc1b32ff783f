// Tests for RedSyncCompressor ("redsync"): k above #{|x| >= mean|x|} falls back to the exact
// top-k. Its band and what it shares with dgc are tested for both in sparse_selection_test.cc.
#include "kernels/cpu/redsync.h"

#include <cstdint>
#include <vector>

#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernels/cpu/threshold_test_util.h"

namespace gravac::kernels::cpu {
namespace {

using testing::Dist;
using testing::Make;
using testing::Oracle;

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
