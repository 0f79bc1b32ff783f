#include "kernels/wire_format.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/randomk.h"

namespace gravac::kernels {
namespace {

using ::gravac::testing::IsOk;
using ::gravac::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

uint64_t Xxh(std::string_view s, uint64_t seed = 0) {
  return internal::XxHash64(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size()), seed);
}

TEST(WireFormatTest, ChecksumIsXxHash64) {
  // Published XXH64 vectors: every tail length and the 32-byte stripe loop.
  EXPECT_EQ(Xxh(""), 0xef46db3751d8e999ull);
  EXPECT_EQ(Xxh("a"), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(Xxh("abc"), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(Xxh("12345678901234567890123456789012"), 0x40fd1aa52d98274cull);
  EXPECT_EQ(Xxh("The quick brown fox jumps over the lazy dog"), 0x0b242d361fda71bcull);
}

// A valid Compressed of every layout and value type. Values are pre-rounded to the type.
Compressed Make(WireLayout layout, ValueType type, int64_t n, int64_t count) {
  Compressed c;
  c.dense_size = n;
  c.value_type = type;
  if (layout == WireLayout::kDense) {
    c.dense = true;
    count = n;
  } else if (layout == WireLayout::kSparseImplicit) {
    c.implicit_indices = true;
    c.seed = cpu::RandomKSeed(7, "w", count);
    EXPECT_THAT(cpu::RandomKIndices(n, count, c.seed, &c.indices), IsOk());
  } else {
    for (int64_t i = 0; i < count; ++i) c.indices.push_back(static_cast<int32_t>(i * (n / count)));
  }
  for (int64_t i = 0; i < count; ++i) {
    c.values.push_back(std::sin(0.37f * i) * 100.0f + (i % 3 == 0 ? -1e-4f : 3.0f));
  }
  cpu::RoundToValueType(type, absl::MakeSpan(c.values));
  return c;
}

void ExpectSame(const Compressed& a, const Compressed& b) {
  EXPECT_EQ(a.dense_size, b.dense_size);
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.value_type, b.value_type);
  EXPECT_EQ(a.implicit_indices, b.implicit_indices);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.indices, b.indices);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a.values[i]), std::bit_cast<uint32_t>(b.values[i])) << i;
  }
}

struct Case {
  WireLayout layout;
  ValueType type;
  int64_t n;
  int64_t count;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const char* layouts[] = {"Explicit", "Implicit", "Dense"};
  return absl::StrFormat("%s_%s_n%d_k%d", layouts[static_cast<int>(info.param.layout)],
                         cpu::ValueTypeName(info.param.type), info.param.n, info.param.count);
}

class WireRoundTripTest : public ::testing::TestWithParam<Case> {};

TEST_P(WireRoundTripTest, RoundTripsExactly) {
  const Case& p = GetParam();
  Compressed c = Make(p.layout, p.type, p.n, p.count);
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  const size_t width = p.type == ValueType::kFloat32 ? 4 : 2;
  const size_t idx_bytes = p.layout == WireLayout::kSparseExplicit ? 4 : 0;
  EXPECT_EQ(buf.size(), kWireHeaderSize + c.values.size() * (width + idx_bytes));
  EXPECT_EQ(buf.size(), EncodedSize(c));
  EXPECT_EQ(buf[6], static_cast<uint8_t>(p.layout));
  EXPECT_EQ(buf[7], static_cast<uint8_t>(p.type));
  Compressed d;
  d.indices = {1, 2, 3};  // stale content must be replaced
  d.values = {9};
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);
}

TEST_P(WireRoundTripTest, EveryTruncationAndExtensionIsRejected) {
  const Case& p = GetParam();
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(Make(p.layout, p.type, p.n, p.count), &buf), IsOk());
  Compressed d;
  for (size_t len = 0; len < buf.size(); ++len) {
    absl::Status s = Decode(absl::MakeConstSpan(buf.data(), len), &d);
    ASSERT_THAT(s, StatusIs(absl::StatusCode::kDataLoss)) << "truncated to " << len;
  }
  std::vector<uint8_t> longer = buf;
  longer.push_back(0);
  EXPECT_THAT(Decode(longer, &d), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("size")));
}

TEST_P(WireRoundTripTest, EverySingleByteFlipIsRejected) {
  const Case& p = GetParam();
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(Make(p.layout, p.type, p.n, p.count), &buf), IsOk());
  Compressed d;
  // Every header byte; every payload byte for small buffers, else a stride sample plus the end.
  const size_t stride = buf.size() <= 4096 ? 1 : buf.size() / 997;
  std::vector<size_t> positions;
  for (size_t i = 0; i < kWireHeaderSize; ++i) positions.push_back(i);
  for (size_t i = kWireHeaderSize; i < buf.size(); i += stride) positions.push_back(i);
  if (buf.size() > kWireHeaderSize) positions.push_back(buf.size() - 1);
  for (size_t pos : positions) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = buf;
      bad[pos] ^= mask;
      ASSERT_THAT(Decode(bad, &d), Not(IsOk()))
          << "byte " << pos << " ^ " << static_cast<int>(mask) << " accepted";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayoutsAndTypes, WireRoundTripTest,
    ::testing::Values(Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1000, 37},
                      Case{WireLayout::kSparseExplicit, ValueType::kFloat16, 1000, 37},
                      Case{WireLayout::kSparseExplicit, ValueType::kBFloat16, 1000, 37},
                      Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1000, 0},
                      Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1, 1},
                      Case{WireLayout::kSparseImplicit, ValueType::kFloat32, 5000, 50},
                      Case{WireLayout::kSparseImplicit, ValueType::kFloat16, 5000, 50},
                      Case{WireLayout::kSparseImplicit, ValueType::kBFloat16, 5000, 50},
                      Case{WireLayout::kSparseImplicit, ValueType::kFloat32, 5000, 0},
                      Case{WireLayout::kSparseImplicit, ValueType::kFloat16, 200000, 20000},
                      Case{WireLayout::kDense, ValueType::kFloat16, 300, 300},
                      Case{WireLayout::kDense, ValueType::kBFloat16, 300, 300},
                      Case{WireLayout::kDense, ValueType::kFloat32, 300, 300},
                      Case{WireLayout::kDense, ValueType::kFloat16, 0, 0},
                      Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1 << 20, 10000}),
    CaseName);

// Rewrites the checksum so that a deliberately malformed payload reaches the content checks.
void Reseal(std::vector<uint8_t>* buf) {
  std::memset(buf->data() + 32, 0, 8);
  uint64_t h = internal::XxHash64(absl::MakeConstSpan(buf->data(), 32), 0);
  h = internal::XxHash64(
      absl::MakeConstSpan(buf->data() + kWireHeaderSize, buf->size() - kWireHeaderSize), h);
  std::memcpy(buf->data() + 32, &h, 8);
}

template <typename T>
void Poke(std::vector<uint8_t>* buf, size_t offset, T v) {
  std::memcpy(buf->data() + offset, &v, sizeof(T));
}

TEST(WireFormatTest, MessagesSayWhichFieldIsWrong) {
  Compressed c = Make(WireLayout::kSparseExplicit, ValueType::kFloat32, 100, 4);  // 0,25,50,75
  std::vector<uint8_t> good;
  ASSERT_THAT(Encode(c, &good), IsOk());
  Compressed d;
  auto decode = [&d](std::vector<uint8_t> b) { return Decode(b, &d); };
  std::vector<uint8_t> b;

  EXPECT_THAT(Decode(absl::MakeConstSpan(good.data(), 10), &d),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("10 bytes"), HasSubstr("40-byte header"))));
  b = good;
  b[0] = 'X';
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("magic"), HasSubstr("0x43565247"))));
  b = good;
  Poke<uint16_t>(&b, 4, 2);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("version 2"), HasSubstr("expected 1"))));
  b = good;
  b[6] = 3;
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layout 3")));
  b = good;
  b[7] = 9;
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("value type 9")));
  b = good;
  Poke<int64_t>(&b, 16, 101);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("count 101"), HasSubstr("dense_size = 100"))));
  b = good;
  Poke<int64_t>(&b, 8, int64_t{1} << 40);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense_size")));
  b = good;
  Poke<int64_t>(&b, 16, 3);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kDataLoss,
                                  AllOf(HasSubstr("size mismatch"), HasSubstr("implies 64 bytes"),
                                        HasSubstr("buffer has 72"))));
  b = good;
  Poke<uint64_t>(&b, 24, 5);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seed")));
  b = good;
  b[kWireHeaderSize + 1] ^= 0x10;
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum mismatch")));

  // Content errors behind a valid checksum (a buggy or hostile sender).
  const size_t idx_at = kWireHeaderSize + 4 * 4;
  b = good;
  Poke<int32_t>(&b, idx_at + 4 * 2, 25);
  Reseal(&b);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("strictly ascending"), HasSubstr("position 2"))));
  b = good;
  Poke<int32_t>(&b, idx_at + 4 * 3, 100);
  Reseal(&b);
  EXPECT_THAT(decode(b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("index 100"), HasSubstr("[0, dense_size = 100)"))));
  b = good;
  Poke<int32_t>(&b, idx_at, -1);
  Reseal(&b);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index -1")));
  b = good;
  Poke<float>(&b, kWireHeaderSize + 4, std::numeric_limits<float>::infinity());
  Reseal(&b);
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("non-finite"), HasSubstr("position 1"))));
  b = good;
  ASSERT_THAT(decode(b), IsOk());  // the untouched buffer still decodes
}

TEST(WireFormatTest, Fp16NanAndDenseCountAreRejected) {
  Compressed c = Make(WireLayout::kDense, ValueType::kFloat16, 8, 8);
  std::vector<uint8_t> b;
  ASSERT_THAT(Encode(c, &b), IsOk());
  std::vector<uint8_t> nan = b;
  Poke<uint16_t>(&nan, kWireHeaderSize + 2 * 5, 0x7e00);
  Reseal(&nan);
  Compressed d;
  EXPECT_THAT(Decode(nan, &d), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr("non-finite"), HasSubstr("position 5"))));
  std::vector<uint8_t> short_dense = b;
  Poke<int64_t>(&short_dense, 16, 7);
  short_dense.resize(short_dense.size() - 2);
  Reseal(&short_dense);
  EXPECT_THAT(Decode(short_dense, &d),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count == dense_size")));
}

TEST(WireFormatTest, EncodeRejectsMalformedInput) {
  std::vector<uint8_t> buf;
  Compressed c = Make(WireLayout::kSparseExplicit, ValueType::kFloat16, 100, 4);
  c.values[2] = 1.0f + std::ldexp(1.0f, -12);  // not representable in fp16
  EXPECT_THAT(Encode(c, &buf), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr("position 2"), HasSubstr("fp16"))));
  c = Make(WireLayout::kSparseExplicit, ValueType::kFloat32, 100, 4);
  c.values[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(Encode(c, &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 1")));
  c = Make(WireLayout::kSparseExplicit, ValueType::kFloat32, 100, 4);
  std::swap(c.indices[1], c.indices[2]);
  EXPECT_THAT(Encode(c, &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("strictly ascending")));
  c = Make(WireLayout::kSparseExplicit, ValueType::kFloat32, 100, 4);
  c.indices.pop_back();
  EXPECT_THAT(Encode(c, &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 indices for 4 values")));
  c = Make(WireLayout::kDense, ValueType::kBFloat16, 10, 10);
  c.values.pop_back();
  EXPECT_THAT(Encode(c, &buf), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dense")));
  c = Make(WireLayout::kSparseImplicit, ValueType::kFloat32, 10, 5);
  c.dense_size = 4;
  EXPECT_THAT(Encode(c, &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("count 5 > dense_size 4")));
}

}  // namespace
}  // namespace gravac::kernels
