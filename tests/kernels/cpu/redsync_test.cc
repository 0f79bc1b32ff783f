// Tests for RedSyncCompressor ("redsync"): k <= count < 2k on normal, heavy-tailed and tied
// inputs, the output is a threshold set (no dropped |x| above a kept one), both non-converging
// paths (all-equal magnitudes; k above #{|x| >= mean|x|}) fall back to the exact top-k,
// validation, determinism across pools, and multi-level compression.
#include "kernels/cpu/redsync.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/select.h"
#include "tests/kernels/cpu/threshold_test_util.h"

namespace gravac::kernels::cpu {
namespace {

using ::gravac::testing::IsOk;
using ::gravac::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using testing::Dist;
using testing::ExpectThresholdSet;
using testing::Make;
using testing::Name;

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

std::vector<int32_t> Oracle(const std::vector<float>& x, int64_t k) {
  std::vector<std::pair<float, int32_t>> pairs(x.size());
  for (size_t i = 0; i < x.size(); ++i) pairs[i] = {std::fabs(x[i]), static_cast<int32_t>(i)};
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t> top;
  for (int64_t i = 0; i < k; ++i) top.push_back(pairs[i].second);
  std::sort(top.begin(), top.end());
  return top;
}

TEST(RedSyncCompressorTest, AllEqualMagnitudesFallBackToExactTopK) {
  ThreadPool pool(2);
  RedSyncCompressor redsync({ValueType::kFloat32, &pool});
  for (int64_t n : {1000, 1 << 20}) {
    for (float value : {0.0f, 1.5f}) {
      std::vector<float> x(n, value);
      for (int64_t i = 1; i < n; i += 2) x[i] = -value;
      Compressed out;
      ASSERT_THAT(redsync.Compress(x, 100.0, {"w"}, &out), IsOk());
      EXPECT_TRUE(redsync.last_stats().fallback);
      const int64_t k = KeepCount(n, 100.0);
      ASSERT_EQ(out.count(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(out.indices[i], i);  // ties: lowest indices
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

TEST(RedSyncCompressorTest, SmallSizesAndThetaOne) {
  RedSyncCompressor redsync({});
  Compressed out;
  ASSERT_THAT(redsync.Compress({}, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.count(), 0);
  EXPECT_EQ(out.dense_size, 0);
  const std::vector<float> one = {-2.5f};
  ASSERT_THAT(redsync.Compress(one, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.indices, std::vector<int32_t>{0});
  EXPECT_EQ(out.values, std::vector<float>{-2.5f});
  const std::vector<float> x = Make(Dist::kNormal, 777, 1);
  ASSERT_THAT(redsync.Compress(x, 1.0, {"w"}, &out), IsOk());
  ASSERT_EQ(out.count(), 777);
  EXPECT_EQ(out.values, x);
}

TEST(RedSyncCompressorTest, RejectsBadInputNamingTensor) {
  ThreadPool pool(2);
  RedSyncCompressor redsync({ValueType::kFloat32, &pool});
  Compressed out;
  const int64_t n = (1 << 20) + 1;
  for (int64_t pos : {int64_t{0}, n / 3, n - 1}) {
    std::vector<float> x = Make(Dist::kNormal, n, 2);
    x[pos] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(
        redsync.Compress(x, 100.0, {"attn.q"}, &out),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("'attn.q'"), HasSubstr(absl::StrCat("at index ", pos, " ")))));
  }
  const std::vector<float> x = Make(Dist::kNormal, 100, 2);
  EXPECT_THAT(redsync.Compress(x, 0.5, {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'attn.q'")));
  EXPECT_THAT(redsync.Compress(x, std::numeric_limits<double>::quiet_NaN(), {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RedSyncCompressorTest, DeterministicAcrossRunsAndPools) {
  ThreadPool one(1), two(2);
  RedSyncCompressor a({ValueType::kFloat32, &one}), b({ValueType::kFloat32, &two});
  for (Dist dist : {Dist::kNormal, Dist::kCauchy, Dist::kTies}) {
    const std::vector<float> x = Make(dist, (1 << 21) + 11, 8);
    Compressed oa, ob, again;
    ASSERT_THAT(a.Compress(x, 100.0, {"w"}, &oa), IsOk());
    ASSERT_THAT(b.Compress(x, 100.0, {"w"}, &ob), IsOk());
    ASSERT_THAT(b.Compress(x, 100.0, {"w"}, &again), IsOk());
    EXPECT_EQ(oa.indices, ob.indices) << Name(dist);
    EXPECT_EQ(oa.values, ob.values);
    EXPECT_EQ(ob.indices, again.indices);
  }
}

TEST(RedSyncCompressorTest, CompressFromIsExactTopKOfFirst) {
  ThreadPool pool(2);
  RedSyncCompressor redsync({ValueType::kFloat32, &pool});
  const std::vector<float> x = Make(Dist::kLaplace, 200003, 9);
  Compressed first, second, expected;
  ASSERT_THAT(redsync.Compress(x, 10.0, {"w"}, &first), IsOk());
  ASSERT_THAT(redsync.CompressFrom(first, 100.0, {"w"}, &second), IsOk());
  ASSERT_THAT(SelectTopKFromSparse(first, KeepCount(200003, 100.0), &expected), IsOk());
  EXPECT_EQ(second.count(), KeepCount(200003, 100.0));
  EXPECT_EQ(second.indices, expected.indices);
  ExpectThresholdSet(x, second);
}

TEST(RedSyncCompressorTest, RoundsValuesToValueType) {
  const std::vector<float> x = Make(Dist::kNormal, 65537, 10);
  RedSyncCompressor fp32({}), bf16({ValueType::kBFloat16, nullptr});
  Compressed a, b;
  ASSERT_THAT(fp32.Compress(x, 100.0, {"w"}, &a), IsOk());
  ASSERT_THAT(bf16.Compress(x, 100.0, {"w"}, &b), IsOk());
  EXPECT_EQ(b.value_type, ValueType::kBFloat16);
  EXPECT_EQ(a.indices, b.indices);
  RoundToValueType(ValueType::kBFloat16, absl::MakeSpan(a.values));
  EXPECT_EQ(a.values, b.values);
}

}  // namespace
}  // namespace gravac::kernels::cpu
