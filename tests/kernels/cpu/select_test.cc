// Tests for the selection machinery (kernels/cpu/select.h): exact top-k against a stable-sort
// oracle, the sampled fast path and its exact fallback, threshold filter and count, top-k from a
// sparse output, and identical results on pools of 1 and 2 lanes.
#include "kernels/cpu/select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/selection_output.h"
#include "kernels/cpu/threshold_counter.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

enum class Dist { kNormal, kTies, kZeros, kNegative, kSubnormal };

std::string DistName(Dist d) {
  const char* names[] = {"Normal", "Ties", "Zeros", "Negative", "Subnormal"};
  return names[static_cast<int>(d)];
}

std::vector<float> Make(Dist d, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff);
  std::vector<float> x(n);
  for (float& v : x) {
    switch (d) {
      case Dist::kNormal:
        v = normal(rng);
        break;
      case Dist::kTies:
        v = static_cast<float>(small(rng));
        break;  // ±1..3 and 0, many equal
      case Dist::kZeros:
        v = (rng() & 1) ? 0.0f : -0.0f;
        break;
      case Dist::kNegative:
        v = -std::fabs(normal(rng)) - 1e-3f;
        break;
      case Dist::kSubnormal:
        v = std::bit_cast<float>(mantissa(rng) | ((rng() & 1) ? 0x80000000u : 0u));
        break;
    }
  }
  return x;
}

// Indices ordered by |x| descending, index ascending (a stable sort of (|x|, index) pairs).
std::vector<int32_t> StableOrder(const std::vector<float>& x) {
  std::vector<std::pair<float, int32_t>> pairs(x.size());
  for (size_t i = 0; i < x.size(); ++i) pairs[i] = {std::fabs(x[i]), static_cast<int32_t>(i)};
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = pairs[i].second;
  return order;
}

std::vector<int32_t> OracleTopK(const std::vector<int32_t>& order, int64_t k) {
  k = std::min<int64_t>(k, order.size());
  std::vector<bool> taken(order.size(), false);  // then by index, without a second sort
  for (int64_t i = 0; i < k; ++i) taken[order[i]] = true;
  std::vector<int32_t> top;
  top.reserve(k);
  for (size_t i = 0; i < taken.size(); ++i) {
    if (taken[i]) top.push_back(static_cast<int32_t>(i));
  }
  return top;
}

// indices == expected and values[i] is bit-identical to x[indices[i]].
void ExpectSelection(const std::vector<float>& x, const std::vector<int32_t>& expected,
                     const std::vector<int32_t>& indices, const std::vector<float>& values) {
  ASSERT_EQ(indices.size(), expected.size());
  ASSERT_EQ(values.size(), expected.size());
  EXPECT_EQ(indices, expected);
  for (size_t i = 0; i < indices.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(values[i]), std::bit_cast<uint32_t>(x[indices[i]]))
        << "position " << i;
  }
}

std::vector<int64_t> Ks(int64_t n) {
  std::vector<int64_t> ks = {1, 2, 5, n / 10, n / 100, n / 1000, n - 1, n};
  for (int64_t& k : ks) k = std::clamp<int64_t>(k, 1, n);
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  return ks;
}

class TopKOracleTest : public ::testing::TestWithParam<std::tuple<int64_t, Dist>> {};

TEST_P(TopKOracleTest, EqualsStableSortOracleOnEveryPool) {
  const auto [n, dist] = GetParam();
  const std::vector<float> x = Make(dist, n, 17 + n);
  const std::vector<int32_t> order = StableOrder(x);
  ThreadPool one(1), two(2);
  ThreadPool* pools[] = {nullptr, &one, &two};
  std::vector<int64_t> ks = n == 0 ? std::vector<int64_t>{0} : Ks(n);
  for (int64_t k : ks) {
    const std::vector<int32_t> expected = OracleTopK(order, k);
    for (ThreadPool* pool : pools) {
      SCOPED_TRACE(absl::StrCat("n=", n, " k=", k, " lanes=", pool ? pool->size() : 0));
      std::vector<int32_t> indices = {99};
      std::vector<float> values = {99.0f};
      ASSERT_THAT(TopK(x, k, pool, &indices, &values), IsOk());
      ExpectSelection(x, expected, indices, values);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SizesAndDistributions, TopKOracleTest,
                         ::testing::Combine(::testing::Values(0, 1, 2, 7, 1009, 65537, 262147),
                                            ::testing::Values(Dist::kNormal, Dist::kTies,
                                                              Dist::kZeros, Dist::kNegative,
                                                              Dist::kSubnormal)),
                         [](const ::testing::TestParamInfo<std::tuple<int64_t, Dist>>& info) {
                           return absl::StrCat("n", std::get<0>(info.param),
                                               DistName(std::get<1>(info.param)));
                         });

TEST(TopKTest, Large2Pow24EqualsOracle) {
  const int64_t n = int64_t{1} << 24;
  ThreadPool pool(2);
  for (Dist dist : {Dist::kNormal, Dist::kTies}) {
    const std::vector<float> x = Make(dist, n, 5);
    const std::vector<int32_t> order = StableOrder(x);
    for (int64_t k : {int64_t{1}, int64_t{16}, n / 1000, n / 100, n / 10, n}) {
      SCOPED_TRACE(absl::StrCat(DistName(dist), " k=", k));
      std::vector<int32_t> indices;
      std::vector<float> values;
      Selector selector(&pool);
      ASSERT_THAT(selector.TopK(x, k, "big", &indices, &values), IsOk());
      ExpectSelection(x, OracleTopK(order, k), indices, values);
      if (dist == Dist::kNormal) {  // the sampled path reads the input once
        EXPECT_EQ(selector.stats().full_passes, 1);
        EXPECT_FALSE(selector.stats().fallback);
      }
    }
  }
}

// Sampled positions of an n-element tensor under the top-k sample layout.
bool Sampled(int64_t i, int64_t n) {
  const int64_t start = Selector::TopKSampleRunStart(n, i / Selector::TopKSampleStratum(n));
  return i >= start && i < start + Selector::kTopKSampleRun;
}

TEST(TopKTest, SampleTakesOneRunPerStratum) {
  for (int64_t n :
       {int64_t{1}, int64_t{65537}, int64_t{131072}, int64_t{2097152 + 5}, int64_t{1} << 24}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    const int64_t stratum = Selector::TopKSampleStratum(n);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);  // key order = index order
    Selector selector(nullptr);
    std::vector<uint32_t> keys;
    ASSERT_TRUE(selector.SampleTopK(x, &keys));
    std::vector<uint32_t> expected;
    std::vector<int64_t> offsets;
    for (int64_t j = 0; j * stratum < n; ++j) {
      const int64_t start = Selector::TopKSampleRunStart(n, j);
      ASSERT_GE(start, j * stratum);
      ASSERT_LT(start, std::min(n, (j + 1) * stratum));
      ASSERT_EQ(start % Selector::kTopKSampleRun, 0);
      offsets.push_back(start - j * stratum);
      for (int64_t i = start; i < std::min(n, start + Selector::kTopKSampleRun); ++i) {
        expected.push_back(MagnitudeKey(x[i]));
      }
    }
    EXPECT_EQ(keys, expected);
    if (n < 131072) {
      EXPECT_EQ(static_cast<int64_t>(keys.size()), n);  // small tensors: sampled whole
    } else {
      EXPECT_NEAR(static_cast<double>(keys.size()) / n, 1.0 / std::min<int64_t>(n / 65536, 128),
                  1e-3);
      // The offsets vary, so no row length lines up with the runs.
      std::sort(offsets.begin(), offsets.end());
      EXPECT_GT(std::unique(offsets.begin(), offsets.end()) - offsets.begin(),
                std::min<int64_t>(stratum / Selector::kTopKSampleRun / 2, 8));
    }
  }
}

// The top-k of a finite x by |x| (ties: lower index), without a sort: the k-th largest |x| by
// nth_element, then an index-ordered walk.
std::vector<int32_t> NthElementTopK(const std::vector<float>& x, int64_t k) {
  std::vector<float> magnitudes(x.size());
  for (size_t i = 0; i < x.size(); ++i) magnitudes[i] = std::fabs(x[i]);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(),
                   std::greater<float>());
  const float kth = magnitudes[k - 1];
  int64_t ties = k;
  for (float v : x) ties -= std::fabs(v) > kth;
  std::vector<int32_t> top;
  for (size_t i = 0; i < x.size(); ++i) {
    const float m = std::fabs(x[i]);
    if (m > kth || (m == kth && ties-- > 0)) top.push_back(static_cast<int32_t>(i));
  }
  return top;
}

// A weight gradient shares one scale per row. A sample of long runs, or of every other row (a
// stride of two rows), misjudges the cut on such data and takes the fallback; the stratified
// sample of short runs must not, for 2^(15 - r mod 16) and log-normal row scales, at rows
// of 1024 and of 1000 (no power of two).
TEST(TopKTest, RowScaledGradientTakesTheSampledPath) {
  constexpr int64_t kRows = 2048;
  ThreadPool pool(2);
  for (int64_t width : {1024, 1000}) {
    for (bool log_normal : {false, true}) {
      const int seeds = width == 1024 ? 20 : 5;
      for (int seed = 0; seed < seeds; ++seed) {
        const int64_t n = kRows * width;
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> normal;
        std::vector<float> x(n);
        for (int64_t r = 0; r < kRows; ++r) {
          const float scale = log_normal ? std::exp(2.0f * normal(rng))
                                         : std::ldexp(1.0f, static_cast<int>(15 - r % 16));
          for (int64_t c = 0; c < width; ++c) x[r * width + c] = scale * normal(rng);
        }
        for (int64_t k : {n / 10, n / 40}) {
          SCOPED_TRACE(
              absl::StrCat("width=", width, " log_normal=", log_normal, " seed=", seed, " k=", k));
          Selector selector(&pool);
          std::vector<int32_t> indices;
          std::vector<float> values;
          ASSERT_THAT(selector.TopK(x, k, "rows", &indices, &values), IsOk());
          EXPECT_FALSE(selector.stats().fallback);
          EXPECT_EQ(selector.stats().full_passes, 1);
          ExpectSelection(x, NthElementTopK(x, k), indices, values);
        }
      }
    }
  }
}

TEST(TopKTest, MisleadingSampleFallsBackToExact) {
  const int64_t n = int64_t{1} << 20;
  ThreadPool pool(2);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  // Large values exactly where the sample looks: the cut lands too high (fewer than k above).
  // Large values exactly where it does not: the cut lands too low (over the memory budget).
  for (bool large_where_sampled : {true, false}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      const bool large = Sampled(i, n) == large_where_sampled;
      x[i] = large ? 100.0f + normal(rng) : 1e-3f * normal(rng);
    }
    const std::vector<int32_t> order = StableOrder(x);
    for (int64_t k : {n / 100, n / 10}) {
      SCOPED_TRACE(absl::StrCat("large_where_sampled=", large_where_sampled, " k=", k));
      Selector selector(&pool);
      std::vector<int32_t> indices;
      std::vector<float> values;
      ASSERT_THAT(selector.TopK(x, k, "adversarial", &indices, &values), IsOk());
      EXPECT_TRUE(selector.stats().fallback);
      EXPECT_EQ(selector.stats().full_passes, 4);
      ExpectSelection(x, OracleTopK(order, k), indices, values);
    }
  }
}

TEST(TopKTest, RejectsNegativeKAndClampsLargeK) {
  const std::vector<float> x = {3.0f, -1.0f, 2.0f};
  std::vector<int32_t> indices;
  std::vector<float> values;
  EXPECT_THAT(TopK(x, -1, nullptr, &indices, &values),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k >= 0")));
  ASSERT_THAT(TopK(x, 10, nullptr, &indices, &values), IsOk());
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(values, (std::vector<float>{3.0f, -1.0f, 2.0f}));
}

// The caller-memory TopK (a compression backend's message buffers) writes exactly the vector
// form's pairs into min(k, n) slots and nothing past them, on the sampled path, the exact
// fallback and the k = 0 / k = n shortcut.
TEST(TopKTest, IntoCallerMemoryEqualsTheVectorFormAndStaysInItsSlots) {
  const int64_t n = (int64_t{1} << 18) + 3;
  ThreadPool pool(2);
  std::vector<float> adversarial(n);
  for (int64_t i = 0; i < n; ++i) adversarial[i] = Sampled(i, n) ? 100.0f + i % 7 : 1e-3f * (i % 5);
  for (const std::vector<float>& x :
       {Make(Dist::kNormal, n, 11), Make(Dist::kTies, n, 12), adversarial}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, n / 100, n / 10, n, n + 5}) {
      SCOPED_TRACE(absl::StrCat("k=", k));
      Selector by_vector(&pool), by_pointer(&pool);
      std::vector<int32_t> want_indices;
      std::vector<float> want_values;
      ASSERT_THAT(by_vector.TopK(x, k, "t", &want_indices, &want_values), IsOk());
      const size_t kept = static_cast<size_t>(std::min(k, n));
      ASSERT_EQ(want_indices.size(), kept);
      constexpr int32_t kGuardIndex = -7;
      constexpr float kGuardValue = -7.5f;
      std::vector<int32_t> indices(kept + 4, kGuardIndex);
      std::vector<float> values(kept + 4, kGuardValue);
      ASSERT_THAT(by_pointer.TopK(x, k, "t", indices.data(), values.data()), IsOk());
      EXPECT_EQ(by_pointer.stats().fallback, by_vector.stats().fallback);
      EXPECT_TRUE(std::equal(want_indices.begin(), want_indices.end(), indices.begin()));
      EXPECT_TRUE(std::equal(want_values.begin(), want_values.end(), values.begin()));
      for (size_t i = kept; i < indices.size(); ++i) {
        EXPECT_EQ(indices[i], kGuardIndex) << i;
        EXPECT_EQ(values[i], kGuardValue) << i;
      }
    }
  }
  std::vector<int32_t> indices(4);
  std::vector<float> values(4);
  Selector selector(&pool);
  const std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  EXPECT_THAT(selector.TopK(bad, 2, "layer", indices.data(), values.data()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer")));
  EXPECT_THAT(selector.TopK(bad, -1, "layer", indices.data(), values.data()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k >= 0")));
}

class NonFiniteTest : public ::testing::TestWithParam<std::tuple<int64_t, float>> {};

TEST_P(NonFiniteTest, RejectedNamingTensorAndFirstIndex) {
  const auto [n, bad] = GetParam();
  ThreadPool pool(2);
  std::vector<int64_t> positions = {0, n / 2, n - 1};
  if (n > 1000) positions.push_back(n / 2 + 100);  // not a sampled position
  for (int64_t pos : positions) {
    for (int64_t k : {int64_t{1}, std::max<int64_t>(1, n / 100), n}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " pos=", pos, " k=", k));
      std::vector<float> x = Make(Dist::kNormal, n, 9);
      x[pos] = bad;
      if (pos + 7 < n) x[pos + 7] = std::numeric_limits<float>::quiet_NaN();  // later: not named
      Selector selector(&pool);
      std::vector<int32_t> indices;
      std::vector<float> values;
      EXPECT_THAT(selector.TopK(x, k, "layer3.weight", &indices, &values),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           AllOf(HasSubstr("'layer3.weight'"),
                                 HasSubstr(absl::StrCat("at index ", pos, " ")))));
      EXPECT_THAT(TopK(x, k, &pool, &indices, &values),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr(absl::StrCat("at index ", pos, " "))));
      EXPECT_THAT(ThresholdFilter(x, 0.5f, &pool, &indices, &values),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr(absl::StrCat("at index ", pos, " "))));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Values, NonFiniteTest,
    ::testing::Combine(::testing::Values(1, 1009, int64_t{1} << 20),
                       ::testing::Values(std::numeric_limits<float>::quiet_NaN(),
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity())));

TEST(ThresholdFilterTest, KeepsExactlyTheElementsAtOrAboveThreshold) {
  ThreadPool one(1), two(2);
  for (int64_t n : {0, 1, 1009, 262147}) {
    for (Dist dist : {Dist::kNormal, Dist::kTies, Dist::kZeros, Dist::kSubnormal}) {
      const std::vector<float> x = Make(dist, n, 21);
      for (float thr : {-1.0f, 0.0f, 1e-40f, 0.5f, 2.0f, 3.0f, 1e9f}) {
        std::vector<int32_t> expected;
        for (int64_t i = 0; i < n; ++i) {
          if (std::fabs(x[i]) >= thr) expected.push_back(static_cast<int32_t>(i));
        }
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &two}) {
          SCOPED_TRACE(absl::StrCat("n=", n, " ", DistName(dist), " thr=", thr));
          std::vector<int32_t> indices;
          std::vector<float> values;
          ASSERT_THAT(ThresholdFilter(x, thr, pool, &indices, &values), IsOk());
          ExpectSelection(x, expected, indices, values);
          EXPECT_EQ(CountAtLeast(x, thr, pool), static_cast<int64_t>(expected.size()));
        }
      }
    }
  }
}

TEST(ThresholdFilterTest, RejectsNonFiniteThreshold) {
  const std::vector<float> x = {1.0f};
  std::vector<int32_t> indices;
  std::vector<float> values;
  for (float thr :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    EXPECT_THAT(ThresholdFilter(x, thr, nullptr, &indices, &values),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("finite")));
  }
  EXPECT_EQ(CountAtLeast(x, std::numeric_limits<float>::quiet_NaN(), nullptr), 0);
}

TEST(SelectorTest, KthLargestKeyMatchesSort) {
  Selector selector(nullptr);
  for (Dist dist : {Dist::kNormal, Dist::kTies, Dist::kSubnormal}) {
    const std::vector<float> x = Make(dist, 5003, 8);
    std::vector<uint32_t> keys;
    for (float v : x) keys.push_back(MagnitudeKey(v));
    std::vector<uint32_t> sorted = keys;
    std::sort(sorted.begin(), sorted.end(), std::greater<uint32_t>());
    for (int64_t r : {1, 2, 50, 2500, 5002, 5003}) {
      EXPECT_EQ(selector.KthLargestKey(keys, r), sorted[r - 1]) << DistName(dist) << " r=" << r;
    }
  }
}

TEST(SelectorTest, ThresholdCounterCountsEveryBracketedThreshold) {
  const int64_t n = 1 << 16;
  const std::vector<float> x = Make(Dist::kNormal, n, 4);
  Selector selector(nullptr);
  CandidateSet set;
  const uint32_t cut = MagnitudeKey(1.0f);
  selector.Gather(x, cut, n, n, /*sum_abs=*/false, &set);
  ASSERT_TRUE(set.above_complete && set.ties_complete);
  ThresholdCounter counter;
  counter.Reset(set);
  // A bisection for the threshold keeping 1000 elements, checked against full counts.
  float lo = 1.0f, hi = 6.0f;
  for (int step = 0; step < 30; ++step) {
    const float t = lo + (hi - lo) / 2;
    const int64_t count = counter.Count(MagnitudeKey(t));
    ASSERT_EQ(count, CountAtLeast(x, t, nullptr)) << "step " << step;
    if (count > 1000) {
      lo = t;
      counter.Raise();
    } else {
      hi = t;
      counter.Lower();
    }
  }
}

TEST(SelectorTest, GatherSumIsIndependentOfLanesAndCorrect) {
  const int64_t n = (1 << 20) + 5;
  const std::vector<float> x = Make(Dist::kNormal, n, 6);
  double exact = 0.0;
  for (float v : x) exact += std::fabs(v);
  ThreadPool one(1), two(2);
  CandidateSet a, b;
  Selector(&one).Gather(x, MagnitudeKey(2.0f), n, n, /*sum_abs=*/true, &a);
  Selector(&two).Gather(x, MagnitudeKey(2.0f), n, n, /*sum_abs=*/true, &b);
  EXPECT_EQ(a.abs_sum, b.abs_sum);
  EXPECT_NEAR(a.abs_sum, exact, 1e-5 * exact);
  EXPECT_EQ(a.count(), CountAtLeast(x, 2.0f, nullptr));
  EXPECT_EQ(a.max_key, b.max_key);
}

Compressed MakeSparse(const std::vector<float>& x, int64_t every) {
  Compressed c;
  c.dense_size = static_cast<int64_t>(x.size()) * every;
  c.value_type = ValueType::kFloat16;
  for (size_t i = 0; i < x.size(); ++i) {
    c.indices.push_back(static_cast<int32_t>(i * every + 1));
    c.values.push_back(x[i]);
  }
  return c;
}

TEST(SelectTopKFromSparseTest, EqualsOracleOverEntries) {
  for (Dist dist : {Dist::kNormal, Dist::kTies, Dist::kZeros}) {
    const std::vector<float> x = Make(dist, 20011, 2);
    const Compressed first = MakeSparse(x, 3);
    const std::vector<int32_t> order = StableOrder(x);
    for (int64_t k : {0, 1, 7, 2001, 20010, 20011, 50000}) {
      SCOPED_TRACE(absl::StrCat(DistName(dist), " k=", k));
      Compressed out;
      out.implicit_indices = true;
      ASSERT_THAT(SelectTopKFromSparse(first, k, &out), IsOk());
      std::vector<int32_t> positions = OracleTopK(order, k);
      ASSERT_EQ(out.count(), static_cast<int64_t>(positions.size()));
      for (size_t i = 0; i < positions.size(); ++i) {
        EXPECT_EQ(out.indices[i], first.indices[positions[i]]);
        EXPECT_EQ(out.values[i], first.values[positions[i]]);
      }
      EXPECT_EQ(out.dense_size, first.dense_size);
      EXPECT_EQ(out.value_type, ValueType::kFloat16);
      EXPECT_FALSE(out.dense);
      EXPECT_FALSE(out.implicit_indices);
    }
  }
}

TEST(SelectTopKFromSparseTest, InPlaceAndInvalidInput) {
  const std::vector<float> x = Make(Dist::kNormal, 1000, 12);
  Compressed c = MakeSparse(x, 2);
  Compressed expected;
  ASSERT_THAT(SelectTopKFromSparse(c, 10, &expected), IsOk());
  ASSERT_THAT(SelectTopKFromSparse(c, 10, &c), IsOk());
  EXPECT_EQ(c.indices, expected.indices);
  EXPECT_EQ(c.values, expected.values);

  Compressed dense;
  dense.dense = true;
  dense.values = {1.0f};
  EXPECT_THAT(SelectTopKFromSparse(dense, 1, &c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sparse")));
  Compressed ragged = MakeSparse(x, 2);
  ragged.indices.pop_back();
  EXPECT_THAT(SelectTopKFromSparse(ragged, 1, &c), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SelectTopKFromSparse(MakeSparse(x, 2), -1, &c),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CheckCompressArgsTest, RejectsBadThetaAndSize) {
  EXPECT_THAT(CheckCompressArgs(10, 1.0, "t"), IsOk());
  for (double theta : {0.5, 0.0, -3.0, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THAT(CheckCompressArgs(10, theta, "grad.a"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'grad.a'"), HasSubstr("theta"))));
  }
  EXPECT_THAT(CheckCompressArgs(int64_t{1} << 31, 10.0, "grad.b"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'grad.b'")));
}

}  // namespace
}  // namespace gravac::kernels::cpu
