#include "kernels/multilevel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/compressor.h"

namespace gravac::kernels {
namespace {

using namespace ::gravac::testing;  // NOLINT: IsOk, StatusIs
using ::testing::HasSubstr;

TEST(L2NormTest, KnownValues) {
  EXPECT_EQ(L2Norm(std::vector<float>{}), 0.0);
  EXPECT_EQ(L2Norm(std::vector<float>{3.0f, -4.0f}), 5.0);
  EXPECT_EQ(L2Norm(std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1, 1}), 3.0);
  // Accumulated in double: 10^6 copies of 0.1f. Four double accumulators of 2.5e5 terms err by
  // at most ~2.5e5 * 2^-53 = 2.8e-11 relative; an fp32 accumulator would be off by ~1e-3.
  std::vector<float> many(1000000, 0.1f);
  const double expected = std::sqrt(1e6 * static_cast<double>(0.1f) * 0.1f);
  EXPECT_NEAR(L2Norm(many), expected, expected * 3e-11);
  Compressed c;
  c.dense_size = 100;
  c.indices = {4, 50};
  c.values = {-6.0f, 8.0f};
  EXPECT_EQ(L2Norm(c), 10.0);
}

std::vector<float> Ramp(int64_t n) {
  std::vector<float> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = std::sin(0.7 * i) * (1.0 + (i * 37 % 1000));
  return p;
}

class MultiLevelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiLevelTest, CandidateIsASecondLevelOfTheFirst) {
  ASSERT_OK_AND_ASSIGN(auto c, MakeCompressor(GetParam(), CompressorOptions{}));
  const int64_t n = 50000;
  std::vector<float> p = Ramp(n);
  CompressContext ctx{"ml.w", 4, 1};
  MultiLevelResult r;
  ASSERT_THAT(CompressMultiLevel(*c, p, 10.0, 200.0, ctx, &r), IsOk());
  EXPECT_DOUBLE_EQ(r.norm_min, L2Norm(r.at_min));
  EXPECT_DOUBLE_EQ(r.norm_candidate, L2Norm(r.at_candidate));
  if (c->is_dense()) {
    EXPECT_EQ(r.at_candidate.values, r.at_min.values);
    EXPECT_EQ(r.norm_candidate, r.norm_min);
    return;
  }
  EXPECT_LT(r.at_candidate.count(), r.at_min.count());
  EXPECT_LE(r.norm_candidate, r.norm_min);
  // Every candidate entry is an entry of the first level, with the same value.
  for (int64_t j = 0; j < r.at_candidate.count(); ++j) {
    auto it = std::lower_bound(r.at_min.indices.begin(), r.at_min.indices.end(),
                               r.at_candidate.indices[j]);
    ASSERT_TRUE(it != r.at_min.indices.end() && *it == r.at_candidate.indices[j]) << j;
    EXPECT_EQ(r.at_candidate.values[j], r.at_min.values[it - r.at_min.indices.begin()]);
  }
  // topk and randomk promise that the second level equals compressing the full tensor at θ_c
  // (the engine relies on it to send θ_c before computing θ_min's level); check every promise.
  EXPECT_EQ(c->SecondLevelEqualsDirect(), GetParam() == "topk" || GetParam() == "randomk");
  if (c->SecondLevelEqualsDirect()) {
    Compressed direct;
    ASSERT_THAT(c->Compress(p, 200.0, ctx, &direct), IsOk());
    EXPECT_EQ(r.at_candidate.indices, direct.indices);
    EXPECT_EQ(r.at_candidate.values, direct.values);
  }
}

TEST_P(MultiLevelTest, RejectsThetasOutOfOrder) {
  ASSERT_OK_AND_ASSIGN(auto c, MakeCompressor(GetParam(), CompressorOptions{}));
  std::vector<float> p = Ramp(1000);
  MultiLevelResult r;
  EXPECT_THAT(CompressMultiLevel(*c, p, 100.0, 10.0, CompressContext{"ml.b", 0, 0}, &r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta_min <= theta_c")));
  EXPECT_THAT(CompressMultiLevel(*c, p, 0.5, 10.0, CompressContext{"ml.b", 0, 0}, &r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ml.b")));
}

INSTANTIATE_TEST_SUITE_P(AllNames, MultiLevelTest, ::testing::ValuesIn(CompressorNames()),
                         [](const auto& info) { return info.param; });

TEST(MultiLevelTest, TopKNormsOfAKnownSparseStream) {
  // m equal-magnitude spikes in zeros: θ_min = 10 keeps all of them, θ_c = 1000 keeps k of them,
  // so the gains are exactly 1 and sqrt(k / m).
  ASSERT_OK_AND_ASSIGN(auto c, MakeCompressor("topk", CompressorOptions{}));
  const int64_t n = 100000, m = 1000;
  std::vector<float> p(n, 0.0f);
  for (int64_t i = 0; i < m; ++i) p[i * (n / m) + 3] = (i % 2 ? 2.0f : -2.0f);
  MultiLevelResult r;
  ASSERT_THAT(CompressMultiLevel(*c, p, 10.0, 1000.0, CompressContext{"spikes", 0, 0}, &r), IsOk());
  const double full = L2Norm(p);
  EXPECT_DOUBLE_EQ(full, 2.0 * std::sqrt(1000.0));
  EXPECT_DOUBLE_EQ(r.norm_min / full, 1.0);
  EXPECT_DOUBLE_EQ(r.norm_candidate / full, std::sqrt(100.0 / 1000.0));
}

}  // namespace
}  // namespace gravac::kernels
