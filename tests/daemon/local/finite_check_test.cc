#include "daemon/local/finite_check.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::daemon {
namespace {

using collectives::DataType;
using ::testing::HasSubstr;

template <typename T>
const uint8_t* Bytes(const std::vector<T>& v) {
  return reinterpret_cast<const uint8_t*>(v.data());
}

TEST(FiniteCheckTest, FindsTheFirstNaNOrInfinityAcrossBlockBoundaries) {
  for (size_t n : {0u, 1u, 255u, 256u, 257u, 1000u}) {
    std::vector<float> f(n, 1.5f);
    EXPECT_EQ(FirstNonFinite(DataType::kFloat32, Bytes(f), n), -1) << n;
    if (n == 0) continue;
    f[n - 1] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(FirstNonFinite(DataType::kFloat32, Bytes(f), n), static_cast<int64_t>(n - 1));
    f[n / 2] = std::nanf("");
    EXPECT_EQ(FirstNonFinite(DataType::kFloat32, Bytes(f), n), static_cast<int64_t>(n / 2));
  }
  std::vector<double> d(300, -2.0);
  d[299] = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(FirstNonFinite(DataType::kFloat64, Bytes(d), d.size()), 299);
  d[299] = std::numeric_limits<double>::max();  // large but finite
  EXPECT_EQ(FirstNonFinite(DataType::kFloat64, Bytes(d), d.size()), -1);
}

TEST(FiniteCheckTest, HalfTypesAndIntegers) {
  std::vector<uint16_t> h = {0x3c00, 0x7bff, 0x7c00};  // 1, max finite fp16, +inf
  EXPECT_EQ(FirstNonFinite(DataType::kFloat16, Bytes(h), 2), -1);
  EXPECT_EQ(FirstNonFinite(DataType::kFloat16, Bytes(h), 3), 2);
  std::vector<uint16_t> b = {0x3f80, 0x7f7f, 0xffc0};  // 1, max finite bf16, NaN
  EXPECT_EQ(FirstNonFinite(DataType::kBFloat16, Bytes(b), 2), -1);
  EXPECT_EQ(FirstNonFinite(DataType::kBFloat16, Bytes(b), 3), 2);
  std::vector<int32_t> i = {0x7f800000, -1};  // an fp32 infinity's bits, as an integer
  EXPECT_EQ(FirstNonFinite(DataType::kInt32, Bytes(i), 2), -1);
}

TEST(FiniteCheckTest, NamesTheRanksWhoseInputWasNotFinite) {
  TensorSpec spec;
  spec.name = "w";
  std::vector<float> a(10, 1.0f), b(10, 2.0f), sum(10, 3.0f);
  b[7] = std::nanf("");
  sum[7] = std::nanf("");
  std::vector<LocalInput> inputs = {{4, &spec, Bytes(a), 40}, {5, &spec, Bytes(b), 40}};
  EXPECT_THAT(CheckFiniteAllreduce(inputs, Bytes(sum), 40),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'w': non-finite value at element 7 in the input of "
                                 "ranks [5] (gravacd --check_finite)")));
  sum[7] = 3.0f;
  EXPECT_THAT(CheckFiniteAllreduce(inputs, Bytes(sum), 40), IsOk());
}

TEST(FiniteCheckTest, AnOverflowingSumIsNamedAsSuch) {
  TensorSpec spec;
  spec.name = "big";
  const float m = std::numeric_limits<float>::max();
  std::vector<float> a(4, m), b(4, m), sum(4, std::numeric_limits<float>::infinity());
  std::vector<LocalInput> inputs = {{0, &spec, Bytes(a), 16}, {1, &spec, Bytes(b), 16}};
  EXPECT_THAT(CheckFiniteAllreduce(inputs, Bytes(sum), 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("in the sum of ranks [0, 1] (it overflowed)")));
}

TEST(FiniteCheckTest, OtherCollectivesPass) {
  TensorSpec spec;
  spec.kind = CollectiveKind::kAllgather;
  std::vector<float> a(4, std::nanf(""));
  std::vector<LocalInput> inputs = {{0, &spec, Bytes(a), 16}};
  EXPECT_THAT(CheckFiniteAllreduce(inputs, Bytes(a), 16), IsOk());
}

}  // namespace
}  // namespace gravac::daemon
