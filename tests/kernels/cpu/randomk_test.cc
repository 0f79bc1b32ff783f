#include "kernels/cpu/randomk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

void ExpectValidSet(const std::vector<int32_t>& idx, int64_t n, int64_t k) {
  ASSERT_EQ(static_cast<int64_t>(idx.size()), k);
  for (size_t i = 0; i < idx.size(); ++i) {
    ASSERT_GE(idx[i], 0);
    ASSERT_LT(idx[i], n);
    if (i > 0) {
      ASSERT_LT(idx[i - 1], idx[i]) << "not strictly ascending at " << i;
    }
  }
}

// (n, k) pairs covering every code path: k == 0, k == n, k <= n/2 (smallest priorities) and
// k > n/2 (complement of the largest), tiny and large n.
class RandomKIndicesTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(RandomKIndicesTest, ExactlyKDistinctAscendingAndReproducible) {
  auto [n, k] = GetParam();
  std::vector<int32_t> a, b, c;
  ASSERT_THAT(RandomKIndices(n, k, 12345, &a), IsOk());
  ExpectValidSet(a, n, k);
  ASSERT_THAT(RandomKIndices(n, k, 12345, &b), IsOk());
  EXPECT_EQ(a, b);
  ASSERT_THAT(RandomKIndices(n, k, 12346, &c), IsOk());
  ExpectValidSet(c, n, k);
  if (k > 0 && k < n && n > 16) {
    EXPECT_NE(a, c) << "another seed should give another set";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, RandomKIndicesTest,
    ::testing::Values(
        std::pair<int64_t, int64_t>{0, 0}, std::pair<int64_t, int64_t>{1, 1},
        std::pair<int64_t, int64_t>{1, 0}, std::pair<int64_t, int64_t>{17, 3},
        std::pair<int64_t, int64_t>{1000, 1000}, std::pair<int64_t, int64_t>{1000, 999},
        std::pair<int64_t, int64_t>{1000, 500}, std::pair<int64_t, int64_t>{1000, 125},
        std::pair<int64_t, int64_t>{1000, 124}, std::pair<int64_t, int64_t>{1000, 1},
        std::pair<int64_t, int64_t>{1 << 20, 1000}, std::pair<int64_t, int64_t>{1 << 20, 1023},
        std::pair<int64_t, int64_t>{1 << 20, 1 << 17}, std::pair<int64_t, int64_t>{3000001, 299}));

TEST(RandomKIndicesTest, NestedAcrossK) {
  // Shuffle prefixes: the set for a smaller k is a subset of the set for a larger k.
  const int64_t n = 100000;
  std::vector<int32_t> prev;
  for (int64_t k : {99999, 50001, 50000, 12500, 1000, 97, 1}) {  // crosses the complement path
    std::vector<int32_t> cur;
    ASSERT_THAT(RandomKIndices(n, k, 99, &cur), IsOk());
    if (!prev.empty()) {
      EXPECT_TRUE(std::includes(prev.begin(), prev.end(), cur.begin(), cur.end())) << k;
    }
    prev = cur;
  }
}

TEST(RandomKIndicesTest, RoughlyUniform) {
  // Each position is chosen with probability k/n; over many seeds the counts are binomial.
  const int64_t n = 64, k = 8, trials = 20000;
  std::vector<int> hits(n, 0);
  std::vector<int32_t> idx;
  for (int64_t s = 0; s < trials; ++s) {
    ASSERT_THAT(RandomKIndices(n, k, RandomKSeed(1, "u", s), &idx), IsOk());
    for (int32_t i : idx) ++hits[i];
  }
  const double mean = static_cast<double>(trials) * k / n;                 // 2500
  const double sd = std::sqrt(mean * (1.0 - static_cast<double>(k) / n));  // ~46.8
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(hits[i], mean, 6 * sd) << "position " << i;
}

TEST(RandomKIndicesTest, RejectsBadArguments) {
  std::vector<int32_t> idx;
  EXPECT_THAT(RandomKIndices(10, 11, 0, &idx), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RandomKIndices(10, -1, 0, &idx), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RandomKIndices(int64_t{1} << 31, 1, 0, &idx),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RandomKSeedTest, DependsOnEveryInputAndIsFixed) {
  const uint64_t s = RandomKSeed(42, "layer1.weight", 7);
  EXPECT_EQ(s, RandomKSeed(42, "layer1.weight", 7));
  EXPECT_NE(s, RandomKSeed(43, "layer1.weight", 7));
  EXPECT_NE(s, RandomKSeed(42, "layer1.bias", 7));
  EXPECT_NE(s, RandomKSeed(42, "layer1.weight", 8));
  EXPECT_NE(RandomKSeed(0, "", 0), RandomKSeed(0, "", 1));
  // Golden values, computed by an independent Python transcription of the documented algorithm
  // (FNV-1a 64 + splitmix64 finaliser; priorities = splitmix64 outputs, the k smallest). They
  // must never change with the compiler, library or platform, or ranks would disagree.
  EXPECT_EQ(RandomKSeed(0, "", 0), 0x4193fd1b681dcd25ull);
  EXPECT_EQ(RandomKSeed(1, "w", 2), 0x6a9d5a1aa82c123cull);
  std::vector<int32_t> idx;
  ASSERT_THAT(RandomKIndices(1000, 5, RandomKSeed(1, "w", 2), &idx), IsOk());
  EXPECT_EQ(idx, (std::vector<int32_t>{136, 245, 355, 407, 921}));
  ASSERT_THAT(RandomKIndices(16, 4, RandomKSeed(1, "w", 2), &idx), IsOk());
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 6, 8, 14}));
  ASSERT_THAT(RandomKIndices(16, 13, RandomKSeed(1, "w", 2), &idx), IsOk());  // complement path
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15}));
  ASSERT_THAT(RandomKIndices(1 << 20, 4, RandomKSeed(7, "layer", 3), &idx), IsOk());
  EXPECT_EQ(idx, (std::vector<int32_t>{212325, 488300, 685254, 771290}));
}

TEST(RandomKIndicesTest, PoolDoesNotChangeTheResult) {
  ThreadPool pool(2);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1 << 20, 1000},
                      {1 << 20, 1 << 17},
                      {1 << 20, (1 << 20) - 5},
                      {300000, 150001}}) {
    std::vector<int32_t> a, b;
    ASSERT_THAT(RandomKIndices(n, k, 5, &a), IsOk());
    ASSERT_THAT(RandomKIndices(n, k, 5, &b, &pool), IsOk());
    EXPECT_EQ(a, b) << n << " " << k;
  }
}

TEST(RandomKIndicesTest, SelectsTheSmallestPriorities) {
  // Brute-force oracle: sort all (priority, index) pairs.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{5000, 1},
                      {5000, 77},
                      {5000, 2500},
                      {5000, 2501},
                      {5000, 4999}}) {
    std::vector<std::pair<uint64_t, int32_t>> all;
    for (int32_t i = 0; i < n; ++i) all.push_back({RandomKPriority(31, i), i});
    std::sort(all.begin(), all.end());
    std::vector<int32_t> expected;
    for (int64_t j = 0; j < k; ++j) expected.push_back(all[j].second);
    std::sort(expected.begin(), expected.end());
    std::vector<int32_t> got;
    ASSERT_THAT(RandomKIndices(n, k, 31, &got), IsOk());
    EXPECT_EQ(got, expected) << n << " " << k;
  }
}

TEST(RandomKCompressorTest, CompressKeepsExactlyKSeededValues) {
  RandomKCompressor c(CompressorOptions{});
  EXPECT_EQ(c.name(), "randomk");
  EXPECT_FALSE(c.is_dense());
  std::vector<float> x(10007);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 100.0f;
  CompressContext ctx{"fc.weight", 11, 5};
  Compressed out;
  ASSERT_THAT(c.Compress(x, 10.0, ctx, &out), IsOk());
  EXPECT_EQ(out.dense_size, 10007);
  EXPECT_FALSE(out.dense);
  EXPECT_TRUE(out.implicit_indices);
  EXPECT_EQ(out.seed, RandomKSeed(5, "fc.weight", 11));
  EXPECT_EQ(out.count(), KeepCount(10007, 10.0));
  ExpectValidSet(out.indices, 10007, 1000);
  for (int64_t i = 0; i < out.count(); ++i) EXPECT_EQ(out.values[i], x[out.indices[i]]);
  // The receiver regenerates the same indices from the seed alone.
  std::vector<int32_t> regen;
  ASSERT_THAT(RandomKIndices(out.dense_size, out.count(), out.seed, &regen), IsOk());
  EXPECT_EQ(regen, out.indices);
  // Another step or tensor draws another set.
  Compressed other;
  ASSERT_THAT(c.Compress(x, 10.0, CompressContext{"fc.weight", 12, 5}, &other), IsOk());
  EXPECT_NE(other.indices, out.indices);
  ASSERT_THAT(c.Compress(x, 10.0, CompressContext{"fc.bias", 11, 5}, &other), IsOk());
  EXPECT_NE(other.indices, out.indices);
}

TEST(RandomKCompressorTest, CompressFromEqualsCompressAtTheSecondTheta) {
  RandomKCompressor c(CompressorOptions{});
  std::vector<float> x(50000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.01 * i);
  CompressContext ctx{"t", 3, 9};
  Compressed first, second, direct;
  ASSERT_THAT(c.Compress(x, 10.0, ctx, &first), IsOk());
  for (double theta : {10.0, 20.0, 160.0, 1000.0, 50000.0}) {
    ASSERT_THAT(c.CompressFrom(first, theta, ctx, &second), IsOk());
    ASSERT_THAT(c.Compress(x, theta, ctx, &direct), IsOk());
    EXPECT_EQ(second.indices, direct.indices) << theta;
    EXPECT_EQ(second.values, direct.values) << theta;
    EXPECT_EQ(second.seed, direct.seed);
    EXPECT_TRUE(second.implicit_indices);
    EXPECT_TRUE(std::includes(first.indices.begin(), first.indices.end(), second.indices.begin(),
                              second.indices.end()));
  }
  // The second level cannot keep more than the first holds.
  EXPECT_THAT(c.CompressFrom(first, 5.0, ctx, &second),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("first level")));
  // Aliasing out with first is allowed.
  Compressed alias = first;
  ASSERT_THAT(c.CompressFrom(alias, 100.0, ctx, &alias), IsOk());
  EXPECT_EQ(alias.count(), 500);
  // A dense or explicit-index first level is not a randomk output.
  Compressed explicit_first = first;
  explicit_first.implicit_indices = false;
  EXPECT_THAT(c.CompressFrom(explicit_first, 100.0, ctx, &second),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("randomk output")));
}

TEST(RandomKCompressorTest, RoundsToValueTypeAndRejectsBadInput) {
  CompressorOptions options;
  options.value_type = ValueType::kFloat16;
  RandomKCompressor c(options);
  std::vector<float> x(1000, 1.0f + std::ldexp(1.0f, -12));
  Compressed out;
  ASSERT_THAT(c.Compress(x, 1.0, CompressContext{"h", 0, 0}, &out), IsOk());
  EXPECT_EQ(out.value_type, ValueType::kFloat16);
  EXPECT_EQ(out.count(), 1000);
  for (float v : out.values) ASSERT_EQ(v, 1.0f);
  x[777] = 1e6f;  // overflows fp16; kept at θ = 1
  EXPECT_THAT(c.Compress(x, 1.0, CompressContext{"h", 0, 0}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'h'"), HasSubstr("index 777"))));
  x[777] = std::numeric_limits<float>::quiet_NaN();  // rejected even when not selected
  EXPECT_THAT(c.Compress(x, 1000.0, CompressContext{"h", 0, 0}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'h'"), HasSubstr("index 777"))));
  EXPECT_THAT(c.Compress(x, 0.5, CompressContext{"h", 0, 0}, &out),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(c.Compress({}, 10.0, CompressContext{"empty", 0, 0}, &out), IsOk());
  EXPECT_EQ(out.count(), 0);
}

}  // namespace
}  // namespace gravac::kernels::cpu
