// Tests for DgcCompressor ("dgc"): the count stays in its guaranteed band [ceil(0.8k), k] on
// normal, heavy-tailed and tied inputs, the output is a threshold set (no dropped |x| above a
// kept one), the non-converging path falls back to the exact top-k, validation, determinism
// across pools, and multi-level compression.
#include "kernels/cpu/dgc.h"

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

TEST(DgcCompressorTest, AllEqualMagnitudesFallBackToExactTopK) {
  ThreadPool pool(2);
  DgcCompressor dgc({ValueType::kFloat32, &pool});
  for (int64_t n : {1000, 1 << 20}) {
    for (float value : {0.0f, 1.5f}) {
      std::vector<float> x(n, value);
      for (int64_t i = 1; i < n; i += 2) x[i] = -value;
      Compressed out;
      ASSERT_THAT(dgc.Compress(x, 100.0, {"w"}, &out), IsOk());
      EXPECT_TRUE(dgc.last_stats().fallback);
      const int64_t k = KeepCount(n, 100.0);
      ASSERT_EQ(out.count(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(out.indices[i], i);  // ties: lowest indices
    }
  }
}

TEST(DgcCompressorTest, SmallSizesAndThetaOne) {
  DgcCompressor dgc({});
  Compressed out;
  ASSERT_THAT(dgc.Compress({}, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.count(), 0);
  EXPECT_EQ(out.dense_size, 0);
  const std::vector<float> one = {-2.5f};
  ASSERT_THAT(dgc.Compress(one, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.indices, std::vector<int32_t>{0});
  EXPECT_EQ(out.values, std::vector<float>{-2.5f});
  const std::vector<float> x = Make(Dist::kNormal, 777, 1);
  ASSERT_THAT(dgc.Compress(x, 1.0, {"w"}, &out), IsOk());
  ASSERT_EQ(out.count(), 777);
  EXPECT_EQ(out.values, x);
}

TEST(DgcCompressorTest, RejectsBadInputNamingTensor) {
  ThreadPool pool(2);
  DgcCompressor dgc({ValueType::kFloat32, &pool});
  Compressed out;
  const int64_t n = (1 << 20) + 1;
  for (int64_t pos : {int64_t{0}, n / 3, n - 1}) {
    std::vector<float> x = Make(Dist::kNormal, n, 2);
    x[pos] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(
        dgc.Compress(x, 100.0, {"attn.q"}, &out),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("'attn.q'"), HasSubstr(absl::StrCat("at index ", pos, " ")))));
  }
  const std::vector<float> x = Make(Dist::kNormal, 100, 2);
  EXPECT_THAT(dgc.Compress(x, 0.5, {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'attn.q'")));
  EXPECT_THAT(dgc.Compress(x, std::numeric_limits<double>::quiet_NaN(), {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DgcCompressorTest, DeterministicAcrossRunsAndPools) {
  ThreadPool one(1), two(2);
  DgcCompressor a({ValueType::kFloat32, &one}), b({ValueType::kFloat32, &two});
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

TEST(DgcCompressorTest, CompressFromIsExactTopKOfFirst) {
  ThreadPool pool(2);
  DgcCompressor dgc({ValueType::kFloat32, &pool});
  const std::vector<float> x = Make(Dist::kLaplace, 200003, 9);
  Compressed first, second, expected;
  ASSERT_THAT(dgc.Compress(x, 10.0, {"w"}, &first), IsOk());
  ASSERT_THAT(dgc.CompressFrom(first, 100.0, {"w"}, &second), IsOk());
  ASSERT_THAT(SelectTopKFromSparse(first, KeepCount(200003, 100.0), &expected), IsOk());
  EXPECT_EQ(second.count(), KeepCount(200003, 100.0));
  EXPECT_EQ(second.indices, expected.indices);
  ExpectThresholdSet(x, second);
}

TEST(DgcCompressorTest, RoundsValuesToValueType) {
  const std::vector<float> x = Make(Dist::kNormal, 65537, 10);
  DgcCompressor fp32({}), bf16({ValueType::kBFloat16, nullptr});
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
