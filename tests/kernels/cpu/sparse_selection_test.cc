// Tests of the selection skeleton (SparseSelectionCompressor) with both threshold rules, dgc and
// redsync: each rule's count band on normal, heavy-tailed and tied inputs with a threshold-set
// output, tiny tensors and θ = 1, all-equal magnitudes falling back to the exact top-k,
// validation naming the tensor and index, the same output on every pool size, CompressFrom as
// the exact top-k of the first level, and value rounding. redsync's other fallback is in
// redsync_test.cc; topk (the skeleton without a rule) in topk_test.cc.
#include "kernels/cpu/sparse_selection.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/dgc.h"
#include "kernels/cpu/redsync.h"
#include "kernels/cpu/selection_output.h"
#include "tests/kernels/cpu/threshold_test_util.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::AllOf;
using testing::Dist;
using testing::ExpectThresholdSet;
using ::testing::HasSubstr;
using testing::Make;
using testing::Name;

class ThresholdRuleTest : public ::testing::TestWithParam<std::string> {
 protected:
  bool dgc() const { return GetParam() == "dgc"; }
  std::unique_ptr<SparseSelectionCompressor> New(ValueType type, ThreadPool* pool) const {
    const CompressorOptions options{type, pool};
    if (dgc()) return std::make_unique<DgcCompressor>(options);
    return std::make_unique<RedSyncCompressor>(options);
  }
};

// The rule's guaranteed count band (dgc: [ceil(0.8k), k]; redsync: [k, 2k)), a threshold-set
// output, and one pass without fallback where the search must converge.
TEST_P(ThresholdRuleTest, CountInBandAndThresholdProperty) {
  ThreadPool pool(2);
  auto c = New(ValueType::kFloat32, &pool);
  for (int64_t n : {1009, 65537, (1 << 20) + 7}) {
    for (Dist dist : {Dist::kNormal, Dist::kLaplace, Dist::kCauchy, Dist::kTies}) {
      const std::vector<float> x = Make(dist, n, 31 + n);
      for (double theta : {2.0, 10.0, 100.0, 1000.0}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " ", Name(dist), " theta=", theta));
        Compressed out;
        ASSERT_THAT(c->Compress(x, theta, {"w"}, &out), IsOk());
        const int64_t k = KeepCount(n, theta);
        if (dgc()) {
          EXPECT_GE(out.count(), static_cast<int64_t>(std::ceil(0.8 * k)));
          EXPECT_LE(out.count(), k);
        } else {
          EXPECT_GE(out.count(), k);
          EXPECT_LT(out.count(), 2 * k);
        }
        EXPECT_EQ(out.dense_size, n);
        EXPECT_FALSE(out.dense);
        ExpectThresholdSet(x, out);
        // dgc converges on continuous data; redsync's band starts at mean|x|, which Cauchy data
        // puts so high that at θ = 10 fewer than k lie above it.
        const bool converges =
            n > 100000 &&
            (dgc() ? dist != Dist::kTies
                   : (dist == Dist::kNormal || dist == Dist::kLaplace) && theta >= 10.0);
        if (converges) {
          EXPECT_FALSE(c->last_stats().fallback);
          EXPECT_EQ(c->last_stats().full_passes, 1);
        }
      }
    }
  }
}

TEST_P(ThresholdRuleTest, AllEqualMagnitudesFallBackToExactTopK) {
  ThreadPool pool(2);
  auto c = New(ValueType::kFloat32, &pool);
  EXPECT_EQ(c->name(), GetParam());
  for (int64_t n : {1000, 1 << 20}) {
    for (float value : {0.0f, 1.5f}) {
      std::vector<float> x(n, value);
      for (int64_t i = 1; i < n; i += 2) x[i] = -value;
      Compressed out;
      ASSERT_THAT(c->Compress(x, 100.0, {"w"}, &out), IsOk());
      EXPECT_TRUE(c->last_stats().fallback);
      const int64_t k = KeepCount(n, 100.0);
      ASSERT_EQ(out.count(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(out.indices[i], i);  // ties: lowest indices
    }
  }
}

TEST_P(ThresholdRuleTest, SmallSizesAndThetaOne) {
  auto c = New(ValueType::kFloat32, nullptr);
  Compressed out;
  ASSERT_THAT(c->Compress({}, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.count(), 0);
  EXPECT_EQ(out.dense_size, 0);
  const std::vector<float> one = {-2.5f};
  ASSERT_THAT(c->Compress(one, 10.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.indices, std::vector<int32_t>{0});
  EXPECT_EQ(out.values, std::vector<float>{-2.5f});
  const std::vector<float> x = Make(Dist::kNormal, 777, 1);
  ASSERT_THAT(c->Compress(x, 1.0, {"w"}, &out), IsOk());
  ASSERT_EQ(out.count(), 777);
  EXPECT_EQ(out.values, x);
}

TEST_P(ThresholdRuleTest, RejectsBadInputNamingTensor) {
  ThreadPool pool(2);
  auto c = New(ValueType::kFloat32, &pool);
  Compressed out;
  const int64_t n = (1 << 20) + 1;
  for (int64_t pos : {int64_t{0}, n / 3, n - 1}) {
    std::vector<float> x = Make(Dist::kNormal, n, 2);
    x[pos] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(
        c->Compress(x, 100.0, {"attn.q"}, &out),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("'attn.q'"), HasSubstr(absl::StrCat("at index ", pos, " ")))));
  }
  const std::vector<float> x = Make(Dist::kNormal, 100, 2);
  EXPECT_THAT(c->Compress(x, 0.5, {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'attn.q'")));
  EXPECT_THAT(c->Compress(x, std::numeric_limits<double>::quiet_NaN(), {"attn.q"}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(ThresholdRuleTest, DeterministicAcrossRunsAndPools) {
  ThreadPool one(1), two(2);
  auto a = New(ValueType::kFloat32, &one), b = New(ValueType::kFloat32, &two);
  for (Dist dist : {Dist::kNormal, Dist::kCauchy, Dist::kTies}) {
    const std::vector<float> x = Make(dist, (1 << 21) + 11, 8);
    Compressed oa, ob, again;
    ASSERT_THAT(a->Compress(x, 100.0, {"w"}, &oa), IsOk());
    ASSERT_THAT(b->Compress(x, 100.0, {"w"}, &ob), IsOk());
    ASSERT_THAT(b->Compress(x, 100.0, {"w"}, &again), IsOk());
    EXPECT_EQ(oa.indices, ob.indices) << Name(dist);
    EXPECT_EQ(oa.values, ob.values);
    EXPECT_EQ(ob.indices, again.indices);
  }
}

TEST_P(ThresholdRuleTest, CompressFromIsExactTopKOfFirst) {
  ThreadPool pool(2);
  auto c = New(ValueType::kFloat32, &pool);
  EXPECT_FALSE(c->SecondLevelEqualsDirect());
  const std::vector<float> x = Make(Dist::kLaplace, 200003, 9);
  Compressed first, second, expected;
  ASSERT_THAT(c->Compress(x, 10.0, {"w"}, &first), IsOk());
  ASSERT_THAT(c->CompressFrom(first, 100.0, {"w"}, &second), IsOk());
  ASSERT_THAT(SelectTopKFromSparse(first, KeepCount(200003, 100.0), &expected), IsOk());
  EXPECT_EQ(second.count(), KeepCount(200003, 100.0));
  EXPECT_EQ(second.indices, expected.indices);
  ExpectThresholdSet(x, second);
}

TEST_P(ThresholdRuleTest, RoundsValuesToValueType) {
  const std::vector<float> x = Make(Dist::kNormal, 65537, 10);
  auto fp32 = New(ValueType::kFloat32, nullptr), bf16 = New(ValueType::kBFloat16, nullptr);
  Compressed a, b;
  ASSERT_THAT(fp32->Compress(x, 100.0, {"w"}, &a), IsOk());
  ASSERT_THAT(bf16->Compress(x, 100.0, {"w"}, &b), IsOk());
  EXPECT_EQ(b.value_type, ValueType::kBFloat16);
  EXPECT_EQ(a.indices, b.indices);
  RoundToValueType(ValueType::kBFloat16, absl::MakeSpan(a.values));
  EXPECT_EQ(a.values, b.values);
}

INSTANTIATE_TEST_SUITE_P(DgcAndRedSync, ThresholdRuleTest, ::testing::Values("dgc", "redsync"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gravac::kernels::cpu
