// Tests for TopKCompressor ("topk"): exactly k elements equal to a stable-sort oracle, argument
// and input validation, buffer reuse, multi-level compression and value rounding.
#include "kernels/cpu/topk.h"

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
#include "tests/kernels/cpu/threshold_test_util.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Oracle;

std::vector<float> Normal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> Ties(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(small(rng));
  return x;
}

void ExpectMatches(const std::vector<float>& x, const std::vector<int32_t>& expected,
                   const Compressed& c) {
  EXPECT_EQ(c.dense_size, static_cast<int64_t>(x.size()));
  EXPECT_FALSE(c.dense);
  EXPECT_FALSE(c.implicit_indices);
  ASSERT_EQ(c.indices, expected);
  ASSERT_EQ(c.values.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(c.values[i]), std::bit_cast<uint32_t>(x[expected[i]]));
  }
}

TEST(TopKCompressorTest, KeepsExactlyKEqualToOracle) {
  ThreadPool pool(2);
  TopKCompressor topk({ValueType::kFloat32, &pool});
  EXPECT_EQ(topk.name(), "topk");
  EXPECT_FALSE(topk.is_dense());
  for (int64_t n : {0, 1, 2, 7, 1009, 65537, 262147}) {
    for (bool ties : {false, true}) {
      const std::vector<float> x = ties ? Ties(n, n) : Normal(n, n);
      for (double theta : {1.0, 1.5, 10.0, 100.0, 1000.0, 1e9}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " ties=", ties, " theta=", theta));
        Compressed out;
        ASSERT_THAT(topk.Compress(x, theta, {"w", 3, 7}, &out), IsOk());
        const int64_t k = KeepCount(n, theta);
        EXPECT_EQ(out.count(), k);
        ExpectMatches(x, Oracle(x, k), out);
        EXPECT_EQ(out.value_type, ValueType::kFloat32);
      }
    }
  }
}

TEST(TopKCompressorTest, RejectsBadThetaNamingTensor) {
  TopKCompressor topk({});
  const std::vector<float> x = Normal(100, 1);
  Compressed out;
  for (double theta : {0.99, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THAT(topk.Compress(x, theta, {"fc.bias"}, &out),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'fc.bias'"), HasSubstr("theta"))));
    EXPECT_THAT(topk.CompressFrom(out, theta, {"fc.bias"}, &out),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'fc.bias'")));
  }
}

TEST(TopKCompressorTest, RejectsNonFiniteNamingTensorAndIndex) {
  ThreadPool pool(2);
  TopKCompressor topk({ValueType::kFloat32, &pool});
  const int64_t n = (1 << 20) + 3;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (int64_t pos : {int64_t{0}, n / 2 + 77, n - 1}) {
      std::vector<float> x = Normal(n, 2);
      x[pos] = bad;
      for (double theta : {1.0, 100.0}) {
        Compressed out;
        EXPECT_THAT(topk.Compress(x, theta, {"conv1.weight"}, &out),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("'conv1.weight'"),
                                   HasSubstr(absl::StrCat("at index ", pos, " ")))));
      }
    }
  }
}

TEST(TopKCompressorTest, ReusesOutputBuffers) {
  ThreadPool pool(2);
  TopKCompressor topk({ValueType::kFloat32, &pool});
  const std::vector<float> x = Normal(1 << 20, 3);
  Compressed out;
  ASSERT_THAT(topk.Compress(x, 100.0, {"w"}, &out), IsOk());
  const int32_t* indices = out.indices.data();
  const float* values = out.values.data();
  ASSERT_THAT(topk.Compress(x, 100.0, {"w"}, &out), IsOk());
  EXPECT_EQ(out.indices.data(), indices);
  EXPECT_EQ(out.values.data(), values);
  ASSERT_THAT(topk.Compress(x, 1000.0, {"w"}, &out), IsOk());  // smaller: same storage
  EXPECT_EQ(out.indices.data(), indices);
}

TEST(TopKCompressorTest, MultiLevelEqualsDirect) {
  ThreadPool pool(2);
  TopKCompressor topk({ValueType::kFloat32, &pool});
  for (bool ties : {false, true}) {
    const std::vector<float> x = ties ? Ties(300007, 4) : Normal(300007, 4);
    for (double theta_min : {2.0, 10.0}) {
      Compressed first;
      ASSERT_THAT(topk.Compress(x, theta_min, {"w"}, &first), IsOk());
      for (double theta_c : {theta_min, 10.0, 37.5, 100.0, 1000.0, 1e7}) {
        if (theta_c < theta_min) continue;
        SCOPED_TRACE(absl::StrCat("ties=", ties, " ", theta_min, " -> ", theta_c));
        Compressed direct, two_level;
        ASSERT_THAT(topk.Compress(x, theta_c, {"w"}, &direct), IsOk());
        ASSERT_THAT(topk.CompressFrom(first, theta_c, {"w"}, &two_level), IsOk());
        EXPECT_EQ(two_level.indices, direct.indices);
        EXPECT_EQ(two_level.values, direct.values);
        EXPECT_EQ(two_level.dense_size, direct.dense_size);
      }
    }
  }
}

TEST(TopKCompressorTest, SameResultOnOneAndTwoLanes) {
  ThreadPool one(1), two(2);
  TopKCompressor a({ValueType::kFloat32, &one}), b({ValueType::kFloat32, &two}),
      c({ValueType::kFloat32, nullptr});
  for (bool ties : {false, true}) {
    const std::vector<float> x = ties ? Ties(1 << 21, 5) : Normal(1 << 21, 5);
    for (double theta : {10.0, 100.0, 1000.0}) {
      Compressed oa, ob, oc;
      ASSERT_THAT(a.Compress(x, theta, {"w"}, &oa), IsOk());
      ASSERT_THAT(b.Compress(x, theta, {"w"}, &ob), IsOk());
      ASSERT_THAT(c.Compress(x, theta, {"w"}, &oc), IsOk());
      EXPECT_EQ(oa.indices, ob.indices);
      EXPECT_EQ(oa.values, ob.values);
      EXPECT_EQ(oa.indices, oc.indices);
    }
  }
}

TEST(TopKCompressorTest, RoundsValuesToValueType) {
  const std::vector<float> x = Normal(50021, 6);
  TopKCompressor fp32({ValueType::kFloat32, nullptr});
  Compressed reference;
  ASSERT_THAT(fp32.Compress(x, 50.0, {"w"}, &reference), IsOk());
  for (ValueType type : {ValueType::kFloat16, ValueType::kBFloat16}) {
    TopKCompressor topk({type, nullptr});
    Compressed out;
    ASSERT_THAT(topk.Compress(x, 50.0, {"w"}, &out), IsOk());
    EXPECT_EQ(out.value_type, type);
    EXPECT_EQ(out.indices, reference.indices);
    std::vector<float> rounded = reference.values;
    RoundToValueType(type, absl::MakeSpan(rounded));
    EXPECT_EQ(out.values, rounded);
    EXPECT_NE(out.values, reference.values);  // rounding happened
  }
  std::vector<float> big = x;
  big[123] = 1e6f;  // beyond fp16
  TopKCompressor fp16({ValueType::kFloat16, nullptr});
  Compressed out;
  EXPECT_THAT(
      fp16.Compress(big, 50.0, {"emb"}, &out),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'emb'"), HasSubstr("123"))));
}

}  // namespace
}  // namespace gravac::kernels::cpu
