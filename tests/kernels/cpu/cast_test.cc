#include "kernels/cpu/cast.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/testing/status_matchers.h"
#include "core/thread_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::kernels::cpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

float Bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(CastTest, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);    // largest finite
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bff);  // just below the overflow tie
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);    // tie rounds to even = Inf
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
}

TEST(CastTest, HalfTiesToEven) {
  // 1 + 2^-11 lies halfway between 1 (even) and 1 + 2^-10 (odd): rounds down.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above a tie rounds up.
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // Subnormal ties: 2^-25 -> 0 (even), 3*2^-25 -> 2*2^-24 (even), just above 2^-25 -> 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  // The largest subnormal plus half a step is a tie to the smallest normal (even mantissa 0).
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);
  // fp32 subnormals are far below fp16's range.
  EXPECT_EQ(FloatToHalf(Bits(0x00000001)), 0x0000);
  EXPECT_EQ(FloatToHalf(-Bits(0x00000001)), 0x8000);
}

TEST(CastTest, HalfInfAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToHalf(inf), 0x7c00);
  EXPECT_EQ(FloatToHalf(-inf), 0xfc00);
  uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling NaN whose payload lives only in the low bits still stays a NaN.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(Bits(0x7f800001)))));
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
}

TEST(CastTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h << " -> " << f;
    }
  }
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion (round to nearest even) is an independent oracle.
TEST(CastTest, HalfMatchesCompilerOracleOnManyFloats) {
  int64_t checked = 0;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4093) {
    float f = Bits(static_cast<uint32_t>(b));
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    ASSERT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(h)) << "float bits 0x" << std::hex << b;
    ++checked;
  }
  // Dense sweep of the subnormal/normal boundary region.
  for (uint32_t b = 0x33000000u; b < 0x38900000u; b += 7) {
    float f = Bits(b);
    ASSERT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f)))
        << "float bits 0x" << std::hex << b;
  }
  EXPECT_GT(checked, 1000000);
}
#endif

// Reference bf16 rounding computed differently: the two neighbours, compared in double.
uint16_t BFloat16Oracle(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  uint32_t lo = b & 0xffff0000u;
  uint32_t hi = lo + 0x10000u;  // next bf16 away from zero (may be Inf)
  double dlo = std::fabs(static_cast<double>(f) - Bits(lo));
  double dhi = (hi & 0x7f800000u) == 0x7f800000u && (lo & 0x7fffffffu) == 0x7f7f0000u
                   ? 3.4028236692093846e38 - std::fabs(static_cast<double>(f))  // Inf acts as 2^128
                   : std::fabs(static_cast<double>(Bits(hi)) - f);
  if (dlo < dhi) return static_cast<uint16_t>(lo >> 16);
  if (dhi < dlo) return static_cast<uint16_t>(hi >> 16);
  return static_cast<uint16_t>(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

TEST(CastTest, BFloat16KnownValuesAndOracle) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(Bits(0x00018000u)), 0x0002);                  // subnormal tie to even
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to Inf
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(Bits(0x7f800001u)))));
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4093) {
    float f = Bits(static_cast<uint32_t>(b));
    if (std::isnan(f) || std::isinf(f)) continue;
    ASSERT_EQ(FloatToBFloat16(f), BFloat16Oracle(f)) << "float bits 0x" << std::hex << b;
  }
}

TEST(CastTest, RoundToValueTypeMatchesTheScalarConversions) {
  // RoundToValueType has its own vectorisable rounding; it must equal the scalar round trip
  // bit for bit (NaN: any NaN), over a stride of all float bit patterns.
  std::vector<float> x, h, b;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 65537) x.push_back(Bits(bits));
  for (uint32_t bits = 0x33000000u; bits < 0x38900000u; bits += 101) x.push_back(Bits(bits));
  h = x;
  b = x;
  RoundToValueType(ValueType::kFloat16, absl::MakeSpan(h));
  RoundToValueType(ValueType::kBFloat16, absl::MakeSpan(b));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(h[i]) && std::isnan(b[i])) << i;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(h[i]),
              std::bit_cast<uint32_t>(HalfToFloat(FloatToHalf(x[i]))))
        << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
    ASSERT_EQ(std::bit_cast<uint32_t>(b[i]),
              std::bit_cast<uint32_t>(BFloat16ToFloat(FloatToBFloat16(x[i]))))
        << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
  }
}

TEST(CastTest, RoundToValueTypeInPlace) {
  std::vector<float> v = {1.0f + std::ldexp(1.0f, -11), 3.14159265f, -1e-8f, 70000.0f};
  std::vector<float> same = v;
  RoundToValueType(ValueType::kFloat32, absl::MakeSpan(same));
  EXPECT_EQ(same, v);
  std::vector<float> h = v;
  RoundToValueType(ValueType::kFloat16, absl::MakeSpan(h));
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], 3.140625f);
  EXPECT_EQ(h[2], -std::ldexp(0.0f, 0));  // below half the smallest subnormal: -0
  EXPECT_TRUE(std::signbit(h[2]));
  EXPECT_TRUE(std::isinf(h[3]));
  std::vector<float> b = v;
  RoundToValueType(ValueType::kBFloat16, absl::MakeSpan(b));
  EXPECT_EQ(b[1], 3.140625f);
  EXPECT_EQ(b[3], 70144.0f);
}

TEST(CastTest, RoundCheckedNamesTensorAndIndex) {
  std::vector<float> v = {1.0f, 2.0f, 1e5f};
  std::vector<int32_t> idx = {3, 10, 42};
  EXPECT_THAT(RoundToValueTypeChecked(ValueType::kFloat16, absl::MakeSpan(v), "layer1.w", idx),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("layer1.w"), HasSubstr("index 42"), HasSubstr("fp16"))));
  std::vector<float> ok = {1.0f, 65504.0f};
  EXPECT_THAT(RoundToValueTypeChecked(ValueType::kFloat16, absl::MakeSpan(ok), "t"), IsOk());
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THAT(RoundToValueTypeChecked(ValueType::kBFloat16, absl::MakeSpan(bad), "t"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 1")));
}

class CastCompressorTest : public ::testing::TestWithParam<bool> {};  // with a pool or not

TEST_P(CastCompressorTest, DenseRoundedOutputAndOverflowError) {
  ThreadPool pool(2);
  CompressorOptions options;
  options.pool = GetParam() ? &pool : nullptr;
  CastCompressor fp16(ValueType::kFloat16, options);
  CastCompressor bf16(ValueType::kBFloat16, options);
  EXPECT_EQ(fp16.name(), "fp16");
  EXPECT_EQ(bf16.name(), "bf16");
  EXPECT_TRUE(fp16.is_dense());
  std::vector<float> x(300000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.001 * i) * 1000.0f + 1e-3f * i;
  CompressContext ctx{"conv.w", 7, 1};
  Compressed out;
  ASSERT_THAT(fp16.Compress(x, 100.0, ctx, &out), IsOk());
  EXPECT_TRUE(out.dense);
  EXPECT_FALSE(out.implicit_indices);
  EXPECT_EQ(out.value_type, ValueType::kFloat16);
  EXPECT_EQ(out.dense_size, static_cast<int64_t>(x.size()));
  ASSERT_EQ(out.values.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(out.values[i], HalfToFloat(FloatToHalf(x[i]))) << i;
  }
  Compressed again;
  ASSERT_THAT(fp16.CompressFrom(out, 1000.0, ctx, &again), IsOk());
  EXPECT_EQ(again.values, out.values);
  EXPECT_THAT(bf16.CompressFrom(out, 1000.0, ctx, &again),
              StatusIs(absl::StatusCode::kInvalidArgument));

  ASSERT_THAT(bf16.Compress(x, 2.0, ctx, &out), IsOk());
  for (size_t i = 0; i < x.size(); i += 97) {
    ASSERT_EQ(out.values[i], BFloat16ToFloat(FloatToBFloat16(x[i]))) << i;
  }

  x[250001] = 65520.0f;
  x[260000] = 1e30f;
  EXPECT_THAT(
      fp16.Compress(x, 2.0, ctx, &out),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("conv.w"), HasSubstr("index 250001"), HasSubstr("overflows fp16"))));
  EXPECT_THAT(bf16.Compress(x, 2.0, ctx, &out), IsOk());  // bf16 has fp32's range
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(bf16.Compress(x, 2.0, ctx, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("conv.w"), HasSubstr("index 5"))));
}

INSTANTIATE_TEST_SUITE_P(PoolOrNot, CastCompressorTest, ::testing::Bool());

TEST(CastCompressorTest, EmptyTensor) {
  CastCompressor fp16(ValueType::kFloat16, CompressorOptions{});
  Compressed out;
  out.values = {1.0f};
  ASSERT_THAT(fp16.Compress({}, 2.0, CompressContext{}, &out), IsOk());
  EXPECT_EQ(out.dense_size, 0);
  EXPECT_TRUE(out.values.empty());
}

}  // namespace
}  // namespace gravac::kernels::cpu
