#include "daemon/collectives/reduce.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gravac::collectives {
namespace {

// Reference rounding of a float to a 16-bit format with `mantissa_bits` explicit bits, by
// comparing the two neighbouring candidates in double precision (ties to even).
template <typename ToFloat>
uint16_t NearestEven(float x, uint16_t lower, ToFloat to_float) {
  const uint16_t upper = lower + 1;
  const double dl = std::fabs(static_cast<double>(to_float(lower)) - x);
  const double du = std::fabs(static_cast<double>(to_float(upper)) - x);
  if (dl < du) return lower;
  if (du < dl) return upper;
  return (lower & 1) ? upper : lower;
}

TEST(ReduceTest, HalfRoundTripsEveryNonNanPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) {
      EXPECT_TRUE(std::isnan(HalfToFloat(bits)));
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(HalfToFloat(bits)))));
      continue;
    }
    ASSERT_EQ(FloatToHalf(HalfToFloat(bits)), bits) << std::hex << h;
  }
}

TEST(ReduceTest, HalfKnownValues) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie rounds to even: infinity
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);             // tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);  // to normal
}

TEST(ReduceTest, FloatToHalfMatchesNearestEvenReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 400000; ++i) {
    // Magnitudes across the half range: exponent of float between -30 and 16.
    const uint32_t exponent = 97 + any(rng) % 47;
    const uint32_t bits = (any(rng) & 0x807fffffu) | (exponent << 23);
    const float x = std::bit_cast<float>(bits);
    const uint16_t got = FloatToHalf(x);
    if (std::fabs(x) >= 65520.0f) {
      ASSERT_EQ(got & 0x7fff, 0x7c00) << x;
      continue;
    }
    // The truncated candidate: the largest half magnitude <= |x|.
    uint16_t lower = static_cast<uint16_t>(got & 0x7fff);
    if (HalfToFloat(lower) > std::fabs(x)) --lower;
    const uint16_t want = NearestEven(std::fabs(x), lower, HalfToFloat);
    ASSERT_EQ(got & 0x7fff, want) << x;
    ASSERT_EQ(got >> 15, bits >> 31) << x;
  }
}

#if defined(__FLT16_MAX__)
TEST(ReduceTest, FloatToHalfMatchesTheCompiler) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 400000; ++i) {
    const float x = std::bit_cast<float>(any(rng));
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    ASSERT_EQ(FloatToHalf(x), std::bit_cast<uint16_t>(h)) << x;
  }
}
#endif

TEST(ReduceTest, BFloat16MatchesNearestEvenReference) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 400000; ++i) {
    const uint32_t bits = any(rng);
    const float x = std::bit_cast<float>(bits);
    const uint16_t got = FloatToBFloat16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(BFloat16ToFloat(got)));
      continue;
    }
    const uint16_t truncated = static_cast<uint16_t>((bits >> 16) & 0x7fff);
    if (truncated == 0x7f7f) continue;  // the next candidate is infinity; covered below
    ASSERT_EQ(got & 0x7fff, NearestEven(std::fabs(x), truncated, BFloat16ToFloat)) << x;
    ASSERT_EQ(got >> 15, bits >> 31);
  }
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
}

TEST(ReduceTest, SumIntoEachType) {
  std::vector<float> a = {1.5f, -2.0f, 3.25f}, b = {0.5f, 2.0f, -1.0f};
  ReduceSumInto(DataType::kFloat32, a.data(), b.data(), a.size());
  EXPECT_EQ(a, (std::vector<float>{2.0f, 0.0f, 2.25f}));

  std::vector<uint16_t> h = {FloatToHalf(1.0f), FloatToHalf(2048.0f), FloatToHalf(-3.0f)};
  std::vector<uint16_t> g = {FloatToHalf(0.5f), FloatToHalf(1.0f), FloatToHalf(3.0f)};
  ReduceSumInto(DataType::kFloat16, h.data(), g.data(), h.size());
  EXPECT_EQ(HalfToFloat(h[0]), 1.5f);
  EXPECT_EQ(HalfToFloat(h[1]), 2048.0f);  // 2049 is not a half: ties to even
  EXPECT_EQ(HalfToFloat(h[2]), 0.0f);

  std::vector<uint16_t> x = {FloatToBFloat16(256.0f), FloatToBFloat16(-1.0f)};
  std::vector<uint16_t> y = {FloatToBFloat16(1.0f), FloatToBFloat16(0.25f)};
  ReduceSumInto(DataType::kBFloat16, x.data(), y.data(), x.size());
  EXPECT_EQ(BFloat16ToFloat(x[0]), 256.0f);  // 257 rounds to even
  EXPECT_EQ(BFloat16ToFloat(x[1]), -0.75f);
}

TEST(ReduceTest, SumOutOfPlaceLeavesTheOperandsAndRoundsAsSumInto) {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f}, b = {0.5f, 2.0f, -1.0f};
  std::vector<float> f(3, -7.0f);
  ReduceSum(DataType::kFloat32, f.data(), a.data(), b.data(), f.size());
  EXPECT_EQ(f, (std::vector<float>{2.0f, 0.0f, 2.25f}));
  EXPECT_EQ(a, (std::vector<float>{1.5f, -2.0f, 3.25f}));

  const std::vector<uint16_t> h = {FloatToHalf(2048.0f), FloatToHalf(-3.0f)};
  const std::vector<uint16_t> g = {FloatToHalf(1.0f), FloatToHalf(3.0f)};
  std::vector<uint16_t> hs(2, 0xffff);
  ReduceSum(DataType::kFloat16, hs.data(), h.data(), g.data(), hs.size());
  EXPECT_EQ(HalfToFloat(hs[0]), 2048.0f);  // 2049 is not a half: ties to even
  EXPECT_EQ(HalfToFloat(hs[1]), 0.0f);

  const std::vector<uint16_t> x = {FloatToBFloat16(256.0f)}, y = {FloatToBFloat16(1.0f)};
  std::vector<uint16_t> xs(1, 0);
  ReduceSum(DataType::kBFloat16, xs.data(), x.data(), y.data(), xs.size());
  EXPECT_EQ(BFloat16ToFloat(xs[0]), 256.0f);  // 257 rounds to even

  const std::vector<int32_t> i = {std::numeric_limits<int32_t>::max(), -4}, j = {1, 3};
  std::vector<int32_t> is(2, 0);
  ReduceSum(DataType::kInt32, is.data(), i.data(), j.data(), is.size());
  EXPECT_EQ(is, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -1}));  // wraps

  const std::vector<uint8_t> u = {200, 10}, v = {100, 20};
  std::vector<uint8_t> us(2, 0);
  ReduceSum(DataType::kUInt8, us.data(), u.data(), v.data(), us.size());
  EXPECT_EQ(us, (std::vector<uint8_t>{44, 30}));  // 300 mod 256

  // dst may be the second operand too.
  std::vector<double> d = {0.1, -3.0}, e = {0.2, 1.0};
  ReduceSum(DataType::kFloat64, e.data(), d.data(), e.data(), e.size());
  EXPECT_EQ(e, (std::vector<double>{0.1 + 0.2, -2.0}));
  std::vector<int64_t> l = {int64_t{1} << 40}, m = {int64_t{1} << 40};
  ReduceSum(DataType::kInt64, m.data(), l.data(), m.data(), m.size());
  EXPECT_EQ(m[0], int64_t{1} << 41);
}

TEST(ReduceTest, DivideInPlaceRoundsOnce) {
  std::vector<float> f = {3.0f, -9.0f};
  DivideInPlace(DataType::kFloat32, f.data(), f.size(), 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, -3.0f}));
  std::vector<uint16_t> h = {FloatToHalf(1.0f)};
  DivideInPlace(DataType::kFloat16, h.data(), 1, 3);
  EXPECT_EQ(h[0], FloatToHalf(1.0f / 3.0f));
  std::vector<uint16_t> b = {FloatToBFloat16(10.0f)};
  DivideInPlace(DataType::kBFloat16, b.data(), 1, 4);
  EXPECT_EQ(BFloat16ToFloat(b[0]), 2.5f);
}

TEST(ReduceTest, SumAndDivideWiderTypes) {
  std::vector<double> d = {1e300, 0.1, -3.0}, e = {1e300, 0.2, 1.0};
  ReduceSumInto(DataType::kFloat64, d.data(), e.data(), d.size());
  EXPECT_EQ(d, (std::vector<double>{2e300, 0.1 + 0.2, -2.0}));
  DivideInPlace(DataType::kFloat64, d.data(), d.size(), 3);
  EXPECT_EQ(d[1], (0.1 + 0.2) / 3.0);  // divided in double, not fp32

  std::vector<int32_t> i = {7, -7, std::numeric_limits<int32_t>::max()}, j = {0, 0, 1};
  ReduceSumInto(DataType::kInt32, i.data(), j.data(), i.size());
  EXPECT_EQ(i[2], std::numeric_limits<int32_t>::min());  // wraps, no undefined behaviour
  DivideInPlace(DataType::kInt32, i.data(), 2, 2);
  EXPECT_EQ(i[0], 3);   // truncated toward zero
  EXPECT_EQ(i[1], -3);

  std::vector<int64_t> l = {int64_t{1} << 40, -5}, m = {int64_t{1} << 40, 2};
  ReduceSumInto(DataType::kInt64, l.data(), m.data(), l.size());
  EXPECT_EQ(l, (std::vector<int64_t>{int64_t{1} << 41, -3}));
  DivideInPlace(DataType::kInt64, l.data(), l.size(), 4);
  EXPECT_EQ(l, (std::vector<int64_t>{int64_t{1} << 39, 0}));

  std::vector<uint8_t> u = {200, 10}, v = {100, 20};
  ReduceSumInto(DataType::kUInt8, u.data(), v.data(), u.size());
  EXPECT_EQ(u, (std::vector<uint8_t>{44, 30}));  // 300 mod 256
  DivideInPlace(DataType::kUInt8, u.data(), u.size(), 300);  // divisor above 255 works
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  u = {255, 9};
  DivideInPlace(DataType::kUInt8, u.data(), u.size(), 2);
  EXPECT_EQ(u, (std::vector<uint8_t>{127, 4}));
}

TEST(ReduceTest, Names) {
  EXPECT_EQ(DataTypeName(DataType::kBFloat16), "bf16");
  EXPECT_EQ(DataTypeName(DataType::kFloat64), "fp64");
  EXPECT_EQ(DataTypeName(DataType::kUInt8), "uint8");
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kUInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(ReduceOpName(ReduceOp::kAverage), "average");
}

}  // namespace
}  // namespace gravac::collectives
