#include "kernels/wire_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/str_format.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/randomk.h"
#include "kernels/cpu/scatter_add.h"

namespace gravac::kernels {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

uint64_t Xxh(std::string_view s, uint64_t seed = 0) { return XXH64(s.data(), s.size(), seed); }

TEST(WireFormatTest, ChecksumIsXxHash64) {
  // Published XXH64 vectors: every tail length and the 32-byte stripe loop.
  EXPECT_EQ(Xxh(""), 0xef46db3751d8e999ull);
  EXPECT_EQ(Xxh("a"), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(Xxh("abc"), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(Xxh("12345678901234567890123456789012"), 0x40fd1aa52d98274cull);
  EXPECT_EQ(Xxh("The quick brown fox jumps over the lazy dog"), 0x0b242d361fda71bcull);
  // A fixed message keeps the checksum it had with gravac's own XXH64 (wire compatibility).
  Compressed c;
  c.dense_size = 100;
  c.indices = {3, 50, 99};
  c.values = {1.0f, -2.5f, 4.0f};
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  uint64_t stored;
  std::memcpy(&stored, buf.data() + 32, 8);
  EXPECT_EQ(stored, 0x7840b49336f6d2eaull);
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

// Rewrites the checksum so that a deliberately malformed payload reaches the content checks.
void Reseal(std::vector<uint8_t>* buf) {
  std::memset(buf->data() + 32, 0, 8);
  uint64_t h = XXH64(buf->data(), 32, 0);
  h = XXH64(buf->data() + kWireHeaderSize, buf->size() - kWireHeaderSize, h);
  std::memcpy(buf->data() + 32, &h, 8);
}

template <typename T>
void Poke(std::vector<uint8_t>* buf, size_t offset, T v) {
  std::memcpy(buf->data() + offset, &v, sizeof(T));
}

template <typename T>
void Append(std::vector<uint8_t>* buf, T v) {
  const size_t at = buf->size();
  buf->resize(at + sizeof(T));
  std::memcpy(buf->data() + at, &v, sizeof(T));
}

// The header and values of a sparse message, written from the format table (not by Encode).
std::vector<uint8_t> HeaderAndValues(WireLayout layout, const Compressed& c) {
  std::vector<uint8_t> b;
  Append<uint32_t>(&b, kWireMagic);
  Append<uint16_t>(&b, kWireVersion);
  Append<uint8_t>(&b, static_cast<uint8_t>(layout));
  Append<uint8_t>(&b, static_cast<uint8_t>(c.value_type));
  Append<int64_t>(&b, c.dense_size);
  Append<int64_t>(&b, c.count());
  Append<uint64_t>(&b, 0);  // seed
  Append<uint64_t>(&b, 0);  // checksum, set by Reseal
  for (float v : c.values) {
    switch (c.value_type) {
      case ValueType::kFloat32:
        Append<float>(&b, v);
        break;
      case ValueType::kFloat16:
        Append<uint16_t>(&b, cpu::FloatToHalf(v));
        break;
      case ValueType::kBFloat16:
        Append<uint16_t>(&b, cpu::FloatToBFloat16(v));
        break;
    }
  }
  return b;
}

// Layout 0 exactly as the format table (and the encoder before layout 3) writes it.
std::vector<uint8_t> ExplicitByHand(const Compressed& c) {
  std::vector<uint8_t> b = HeaderAndValues(WireLayout::kSparseExplicit, c);
  for (int32_t i : c.indices) Append<int32_t>(&b, i);
  Reseal(&b);
  return b;
}

// The layout-3 varint stream of ascending indices, byte by byte (a plain LEB128 loop).
std::vector<uint8_t> ReferenceVarints(const std::vector<int32_t>& indices) {
  std::vector<uint8_t> out;
  int64_t next = 0;
  for (int32_t idx : indices) {
    uint64_t gap = static_cast<uint64_t>(idx - next);
    while (gap >= 0x80) {
      out.push_back(static_cast<uint8_t>(gap | 0x80));
      gap >>= 7;
    }
    out.push_back(static_cast<uint8_t>(gap));
    next = int64_t{idx} + 1;
  }
  return out;
}

// A layout-3 message with the given header fields, values and raw varint stream; stream_bytes
// defaults to the stream's length.
std::vector<uint8_t> DeltaByHand(const Compressed& c, const std::vector<uint8_t>& stream,
                                 int64_t stream_bytes = -1) {
  std::vector<uint8_t> b = HeaderAndValues(WireLayout::kSparseDelta, c);
  Append<uint64_t>(&b, stream_bytes >= 0 ? static_cast<uint64_t>(stream_bytes) : stream.size());
  b.insert(b.end(), stream.begin(), stream.end());
  Reseal(&b);
  return b;
}

std::vector<float> Pattern(int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = 0.25f * static_cast<float>(i % 1000) - 7.0f;
  return out;
}

using Buffers = std::vector<const std::vector<uint8_t>*>;

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << "element " << i;
  }
}

// Runs Decode and DecodeAdd (into a patterned buffer of out_size elements) on `b`. Expects the
// same verdict from both (same code, same message after the "Decode"/"DecodeAdd" prefix) and, on
// error, `out` unchanged; returns Decode's status.
absl::Status DecodeBoth(absl::Span<const uint8_t> b, int64_t out_size) {
  Compressed d;
  absl::Status s = Decode(b, &d);
  const std::vector<float> before = Pattern(out_size);
  std::vector<float> out = before;
  absl::Status s_add = DecodeAdd(b, 0.5f, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), s_add.code()) << s << " vs " << s_add;
  if (!s.ok()) {
    constexpr std::string_view kDecode = "Decode", kDecodeAdd = "DecodeAdd";
    const std::string m(s.message()), m_add(s_add.message());
    EXPECT_EQ(m.substr(0, kDecode.size()), kDecode);
    EXPECT_EQ(m_add.substr(0, kDecodeAdd.size()), kDecodeAdd);
    if (m.size() >= kDecode.size() && m_add.size() >= kDecodeAdd.size()) {
      EXPECT_EQ(m.substr(kDecode.size()), m_add.substr(kDecodeAdd.size()));
    }
    ExpectSameBits(out, before);
  }
  return s;
}

// Decode + cpu::DecompressAdd vs DecodeAdd on `b`, bit for bit, into the same starting buffer.
void ExpectDecodeAddMatches(absl::Span<const uint8_t> b, int64_t n, float scale) {
  Compressed d;
  ASSERT_THAT(Decode(b, &d), IsOk());
  std::vector<float> expected = Pattern(n);
  ASSERT_THAT(cpu::DecompressAdd(d, scale, absl::MakeSpan(expected)), IsOk());
  std::vector<float> got = Pattern(n);
  ASSERT_THAT(DecodeAdd(b, scale, absl::MakeSpan(got)), IsOk());
  ExpectSameBits(got, expected);
}

// Sorted distinct random indices in [0, n), each kept with probability `density`.
std::vector<int32_t> RandomIndices(int64_t n, double density, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution keep(density);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (keep(rng)) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

Compressed SparseWith(std::vector<int32_t> indices, int64_t n, ValueType type) {
  Compressed c;
  c.dense_size = n;
  c.value_type = type;
  c.indices = std::move(indices);
  for (size_t i = 0; i < c.indices.size(); ++i) {
    c.values.push_back(std::cos(0.11f * static_cast<float>(i)) * 50.0f - 0.5f);
  }
  cpu::RoundToValueType(type, absl::MakeSpan(c.values));
  return c;
}

// The planning bound holds for every index pattern, including the worst one (equal gaps), and is
// within 25% of the real size for the random positions top-k keeps at θ = 10 and θ = 100.
TEST(WireFormatTest, SparseEncodedSizeBoundHoldsForEveryIndexPattern) {
  constexpr int64_t kN = 200000;
  for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16}) {
    for (int64_t theta : {2, 3, 10, 100, 1000, 20000}) {
      const int64_t k = KeepCount(kN, static_cast<double>(theta));
      std::vector<std::vector<int32_t>> patterns;
      std::vector<int32_t> even, front, back;
      for (int64_t i = 0; i < k; ++i) {
        even.push_back(static_cast<int32_t>(i * (kN / k)));  // equal gaps: the most varint bytes
        front.push_back(static_cast<int32_t>(i));
        back.push_back(static_cast<int32_t>(kN - k + i));
      }
      patterns = {even, front, back, RandomIndices(kN, 1.0 / static_cast<double>(theta), 5)};
      const size_t bound = SparseEncodedSizeBound(kN, k, type, false);
      for (size_t p = 0; p < patterns.size(); ++p) {
        const int64_t count = static_cast<int64_t>(patterns[p].size());
        const Compressed c = SparseWith(patterns[p], kN, type);
        EXPECT_LE(EncodedSize(c), SparseEncodedSizeBound(kN, count, type, false))
            << "θ " << theta << " pattern " << p;
      }
      const Compressed random = SparseWith(patterns[3], kN, type);
      if (theta == 10 || theta == 100) {
        const int64_t count = random.count();
        const double ratio = static_cast<double>(SparseEncodedSizeBound(kN, count, type, false)) /
                             static_cast<double>(EncodedSize(random));
        EXPECT_LT(ratio, 1.25) << "θ " << theta;  // 1.10 / 1.13 fp32, 1.16 / 1.20 fp16
      }
      // Never above fp32/fp16 values with int32 indices (the price before varint indices).
      EXPECT_LE(bound, kWireHeaderSize + static_cast<size_t>(k) *
                                             (type == ValueType::kFloat32 ? 8 : 6));
      EXPECT_EQ(SparseEncodedSizeBound(kN, k, type, true),
                kWireHeaderSize + static_cast<size_t>(k) * (type == ValueType::kFloat32 ? 4 : 2));
    }
  }
  EXPECT_EQ(SparseEncodedSizeBound(kN, 0, ValueType::kFloat32, false), kWireHeaderSize);
}

struct Case {
  WireLayout layout;  // the Compressed kind that Make builds
  ValueType type;
  int64_t n;
  int64_t count;
  WireLayout wire;  // the layout Encode must pick for it
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const char* layouts[] = {"Explicit", "Implicit", "Dense", "Delta"};
  return absl::StrFormat("%s_%s_n%d_k%d", layouts[static_cast<int>(info.param.wire)],
                         cpu::ValueTypeName(info.param.type), info.param.n, info.param.count);
}

class WireRoundTripTest : public ::testing::TestWithParam<Case> {};

TEST_P(WireRoundTripTest, RoundTripsExactly) {
  const Case& p = GetParam();
  Compressed c = Make(p.layout, p.type, p.n, p.count);
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  const size_t width = p.type == ValueType::kFloat32 ? 4 : 2;
  const size_t values_end = kWireHeaderSize + c.values.size() * width;
  EXPECT_EQ(buf.size(), EncodedSize(c));
  EXPECT_EQ(buf[6], static_cast<uint8_t>(p.wire));
  EXPECT_EQ(buf[7], static_cast<uint8_t>(p.type));
  if (p.layout == WireLayout::kSparseExplicit) {
    // Layout 3 exactly when its varints + 8 bytes are fewer than 4 bytes an index.
    const std::vector<uint8_t> varints = ReferenceVarints(c.indices);
    EXPECT_EQ(p.wire == WireLayout::kSparseDelta, 8 + varints.size() < 4 * c.indices.size());
    if (p.wire == WireLayout::kSparseDelta) {
      ASSERT_EQ(buf.size(), values_end + 8 + varints.size());
      uint64_t stream_bytes;
      std::memcpy(&stream_bytes, buf.data() + values_end, 8);
      EXPECT_EQ(stream_bytes, varints.size());
      EXPECT_TRUE(std::equal(varints.begin(), varints.end(), buf.begin() + values_end + 8));
    } else {
      EXPECT_EQ(buf, ExplicitByHand(c));  // the pre-layout-3 bytes, unchanged
    }
  } else {
    EXPECT_EQ(buf.size(), values_end);
  }
  Compressed d;
  d.indices = {1, 2, 3};  // stale content must be replaced
  d.values = {9};
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);
  ExpectDecodeAddMatches(buf, p.n, 0.37f);
}

TEST_P(WireRoundTripTest, EveryTruncationAndExtensionIsRejected) {
  const Case& p = GetParam();
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(Make(p.layout, p.type, p.n, p.count), &buf), IsOk());
  Compressed d;
  const bool both = p.n <= 5000;  // DecodeAdd as well where the output is small
  for (size_t len = 0; len < buf.size(); ++len) {
    const auto cut = absl::MakeConstSpan(buf.data(), len);
    absl::Status s = both ? DecodeBoth(cut, p.n) : Decode(cut, &d);
    ASSERT_THAT(s, StatusIs(absl::StatusCode::kDataLoss)) << "truncated to " << len;
  }
  std::vector<uint8_t> longer = buf;
  longer.push_back(0);
  EXPECT_THAT(DecodeBoth(longer, p.n), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("size")));
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
  const bool both = p.n <= 5000;
  for (size_t pos : positions) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = buf;
      bad[pos] ^= mask;
      ASSERT_THAT(both ? DecodeBoth(bad, p.n) : Decode(bad, &d), Not(IsOk()))
          << "byte " << pos << " ^ " << static_cast<int>(mask) << " accepted";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayoutsAndTypes, WireRoundTripTest,
    ::testing::Values(
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1000, 37, WireLayout::kSparseDelta},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat16, 1000, 37, WireLayout::kSparseDelta},
        Case{WireLayout::kSparseExplicit, ValueType::kBFloat16, 1000, 37, WireLayout::kSparseDelta},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1000, 0,
             WireLayout::kSparseExplicit},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1, 1, WireLayout::kSparseExplicit},
        // Gaps of 2^17 - 1 (3-byte varints): 6 indices tie with layout 0 (8+1+15 = 24) and keep
        // it, 7 make layout 3 smaller (8+1+18 = 27 < 28).
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1 << 20, 6,
             WireLayout::kSparseExplicit},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat16, 1 << 20, 6,
             WireLayout::kSparseExplicit},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1 << 20, 7,
             WireLayout::kSparseDelta},
        Case{WireLayout::kSparseImplicit, ValueType::kFloat32, 5000, 50,
             WireLayout::kSparseImplicit},
        Case{WireLayout::kSparseImplicit, ValueType::kFloat16, 5000, 50,
             WireLayout::kSparseImplicit},
        Case{WireLayout::kSparseImplicit, ValueType::kBFloat16, 5000, 50,
             WireLayout::kSparseImplicit},
        Case{WireLayout::kSparseImplicit, ValueType::kFloat32, 5000, 0,
             WireLayout::kSparseImplicit},
        Case{WireLayout::kSparseImplicit, ValueType::kFloat16, 200000, 20000,
             WireLayout::kSparseImplicit},
        Case{WireLayout::kDense, ValueType::kFloat16, 300, 300, WireLayout::kDense},
        Case{WireLayout::kDense, ValueType::kBFloat16, 300, 300, WireLayout::kDense},
        Case{WireLayout::kDense, ValueType::kFloat32, 300, 300, WireLayout::kDense},
        Case{WireLayout::kDense, ValueType::kFloat16, 0, 0, WireLayout::kDense},
        Case{WireLayout::kSparseExplicit, ValueType::kFloat32, 1 << 20, 10000,
             WireLayout::kSparseDelta}),
    CaseName);

TEST(WireFormatTest, MessagesSayWhichFieldIsWrong) {
  // Layout 0, as senders before layout 3 wrote it (Encode now picks layout 3 for this set).
  Compressed c = Make(WireLayout::kSparseExplicit, ValueType::kFloat32, 100, 4);  // 0,25,50,75
  const std::vector<uint8_t> good = ExplicitByHand(c);
  auto decode = [](std::vector<uint8_t> b) { return DecodeBoth(b, 100); };
  std::vector<uint8_t> b;

  EXPECT_THAT(decode(std::vector<uint8_t>(good.begin(), good.begin() + 10)),
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
  b[6] = 4;
  EXPECT_THAT(decode(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("layout 4"), HasSubstr("3 (sparse delta)"))));
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
  EXPECT_THAT(DecodeBoth(nan, 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("non-finite"), HasSubstr("position 5"))));
  std::vector<uint8_t> short_dense = b;
  Poke<int64_t>(&short_dense, 16, 7);
  short_dense.resize(short_dense.size() - 2);
  Reseal(&short_dense);
  EXPECT_THAT(DecodeBoth(short_dense, 8),
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

// A view over memory that is not a Compressed encodes to the same bytes; EncodeAppend appends
// exactly those bytes after what the buffer held and, on error, leaves it as it was.
TEST(WireFormatTest, AViewEncodesAndAppendsTheSameBytes) {
  for (WireLayout layout : {WireLayout::kSparseExplicit, WireLayout::kSparseImplicit,
                            WireLayout::kDense, WireLayout::kSparseDelta}) {
    for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16}) {
      SCOPED_TRACE(
          absl::StrCat("layout ", static_cast<int>(layout), " type ", static_cast<int>(type)));
      // kSparseExplicit with dense indices would be delta-coded: spread them instead.
      const Compressed c =
          layout == WireLayout::kSparseExplicit
              ? SparseWith({0, 1 << 24, 1 << 28, (1 << 30) + 1}, (int64_t{1} << 31) - 1, type)
              : Make(layout, type, 5000, layout == WireLayout::kDense ? 5000 : 300);
      std::vector<uint8_t> want;
      ASSERT_THAT(Encode(c, &want), IsOk());
      // The view's memory is a copy: nothing of `c` is read through it.
      const std::vector<int32_t> indices = c.indices;
      const std::vector<float> values = c.values;
      const CompressedView view{c.dense_size, c.dense, c.value_type, c.implicit_indices,
                                c.seed,       indices, values};
      EXPECT_EQ(EncodedSize(view), want.size());
      std::vector<uint8_t> got = {1, 2, 3};
      ASSERT_THAT(Encode(view, &got), IsOk());
      EXPECT_EQ(got, want);
      got = {9, 8, 7};
      ASSERT_THAT(EncodeAppend(view, &got), IsOk());
      ASSERT_EQ(got.size(), 3 + want.size());
      EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 3),
                (std::vector<uint8_t>{9, 8, 7}));
      EXPECT_EQ(std::vector<uint8_t>(got.begin() + 3, got.end()), want);
      Compressed back;
      ASSERT_THAT(Decode(absl::MakeConstSpan(got).subspan(3), &back), IsOk());
      ExpectSame(back, c);
    }
  }
  // Errors found before and while writing: the buffer keeps its bytes and its size.
  Compressed c = Make(WireLayout::kSparseDelta, ValueType::kFloat32, 1000, 50);
  c.values[30] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<uint8_t> before = {4, 5, 6, 7};
  std::vector<uint8_t> buf = before;
  EXPECT_THAT(EncodeAppend(ViewOf(c), &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 30")));
  EXPECT_EQ(buf, before);
  c = Make(WireLayout::kSparseDelta, ValueType::kFloat32, 1000, 50);
  std::swap(c.indices[3], c.indices[4]);
  EXPECT_THAT(EncodeAppend(ViewOf(c), &buf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("strictly ascending")));
  EXPECT_EQ(buf, before);
}

TEST(WireFormatTest, DeltaLayoutHasTheExactSizeAndBytes) {
  // Varints: 5 (1 byte), gap 0 (1), gap 193 (2), gap 19799 (3), gap 2979999 (4) = 11 bytes.
  Compressed c = SparseWith({5, 6, 200, 20000, 3000000}, 4000000, ValueType::kFloat32);
  const size_t delta_size = kWireHeaderSize + 5 * 4 + 8 + 11;
  ASSERT_EQ(delta_size, 79u);  // one byte under layout 0's 40 + 5 * (4 + 4)
  EXPECT_EQ(EncodedSize(c), delta_size);
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  ASSERT_EQ(buf.size(), delta_size);
  EXPECT_EQ(buf[6], 3);
  const std::vector<uint8_t> tail(buf.begin() + kWireHeaderSize + 20, buf.end());
  EXPECT_EQ(tail, (std::vector<uint8_t>{11, 0, 0, 0, 0, 0, 0, 0,  // stream_bytes
                                        0x05, 0x00, 0xc1, 0x01, 0xd7, 0x9a, 0x01, 0x9f, 0xf1, 0xb5,
                                        0x01}));
  EXPECT_EQ(buf, DeltaByHand(c, ReferenceVarints(c.indices)));
  Compressed d;
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);

  // One byte more in the stream (gap 193 -> 16384) and layout 3 ties with layout 0: layout 0.
  c = SparseWith({5, 6, 16391, 36191, 3000000}, 4000000, ValueType::kFloat32);
  EXPECT_EQ(EncodedSize(c), kWireHeaderSize + 5 * 8);
  ASSERT_THAT(Encode(c, &buf), IsOk());
  EXPECT_EQ(buf, ExplicitByHand(c));
}

TEST(WireFormatTest, DeltaRoundTripsRandomIndexSets) {
  constexpr int64_t kN = 100000;
  uint32_t seed = 1;
  for (double density : {1.0, 0.5, 0.1, 1.0 / 16, 0.01, 0.001}) {
    for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16, ValueType::kBFloat16}) {
      SCOPED_TRACE(absl::StrFormat("density %g, %s", density, cpu::ValueTypeName(type)));
      Compressed c = SparseWith(RandomIndices(kN, density, seed++), kN, type);
      ASSERT_GT(c.count(), 50);
      const std::vector<uint8_t> varints = ReferenceVarints(c.indices);
      const size_t width = type == ValueType::kFloat32 ? 4 : 2;
      std::vector<uint8_t> buf;
      ASSERT_THAT(Encode(c, &buf), IsOk());
      EXPECT_EQ(buf[6], 3);
      EXPECT_EQ(buf.size(), kWireHeaderSize + c.values.size() * width + 8 + varints.size());
      EXPECT_EQ(buf.size(), EncodedSize(c));
      EXPECT_LT(buf.size(), kWireHeaderSize + c.values.size() * (width + 4));
      EXPECT_EQ(buf, DeltaByHand(c, varints));
      Compressed d;
      ASSERT_THAT(Decode(buf, &d), IsOk());
      ExpectSame(c, d);
      ExpectDecodeAddMatches(buf, kN, -1.25f);
    }
  }
}

// Indices whose gaps straddle every varint length boundary, then the largest index.
std::vector<int32_t> BoundaryGapIndices(int64_t n, std::vector<int64_t> gaps) {
  std::vector<int32_t> out;
  int64_t next = 0;
  for (int64_t g : gaps) {
    out.push_back(static_cast<int32_t>(next + g));
    next += g + 1;
  }
  out.push_back(static_cast<int32_t>(n - 1));
  return out;
}

TEST(WireFormatTest, DeltaRoundTripsVarintBoundaries) {
  // 0, 127 | 128, 16383 | 16384, 2^21 - 1 | 2^21, 2^28 - 1 | 2^28, and a last gap of ~1.6e9 (5
  // bytes) to index 2^31 - 2, with runs of gap 0 so that layout 3 is the smaller one.
  std::vector<int64_t> gaps = {0,       127,           128,     16383, 16384, (1 << 21) - 1,
                               1 << 21, (1 << 28) - 1, 1 << 28, 0,     0,     0};
  for (int i = 0; i < 40; ++i) gaps.push_back(i % 2 == 0 ? 0 : 127);
  const int64_t n = cpu::kMaxElements;
  for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16, ValueType::kBFloat16}) {
    Compressed c = SparseWith(BoundaryGapIndices(n, gaps), n, type);
    ASSERT_EQ(c.indices.back(), n - 1);
    const std::vector<uint8_t> varints = ReferenceVarints(c.indices);
    // One byte per varint up to gap 127, two up to 16383, ..., five from 2^28 (and the last).
    ASSERT_EQ(varints.size(), (1 + 1 + 2 + 2 + 3 + 3 + 4 + 4 + 5 + 3) + 40 + 5);
    std::vector<uint8_t> buf;
    ASSERT_THAT(Encode(c, &buf), IsOk());
    EXPECT_EQ(buf[6], 3);
    EXPECT_EQ(buf, DeltaByHand(c, varints));
    EXPECT_EQ(buf.size(), EncodedSize(c));
    Compressed d;
    ASSERT_THAT(Decode(buf, &d), IsOk());
    ExpectSame(c, d);
  }
  // The largest first index (a 5-byte first varint), then gaps of 0 up to dense_size - 1.
  std::vector<int32_t> top;
  for (int64_t i = n - 10; i < n; ++i) top.push_back(static_cast<int32_t>(i));
  Compressed c = SparseWith(top, n, ValueType::kFloat32);
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  EXPECT_EQ(buf[6], 3);
  EXPECT_EQ(buf.size(), kWireHeaderSize + 10 * 4 + 8 + 5 + 9);
  Compressed d;
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);

  // DecodeAdd over an output it can allocate: gaps up to 2^21 (4-byte varints).
  const int64_t small_n = (1 << 22) + 100000;
  std::vector<int64_t> small_gaps = {0, 127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21};
  for (int i = 0; i < 30; ++i) small_gaps.push_back(i % 3);
  for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16, ValueType::kBFloat16}) {
    c = SparseWith(BoundaryGapIndices(small_n, small_gaps), small_n, type);
    ASSERT_THAT(Encode(c, &buf), IsOk());
    EXPECT_EQ(buf[6], 3);
    ExpectDecodeAddMatches(buf, small_n, 3.0f);
  }
}

TEST(WireFormatTest, DeltaShrinksATheta10Tensor) {
  constexpr int64_t kN = 2097152;
  Compressed c = SparseWith(RandomIndices(kN, 0.1, 42), kN, ValueType::kFloat32);
  const size_t k = c.indices.size();
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  EXPECT_EQ(buf[6], 3);
  // Mean gap 10: almost every varint is one byte, so 5 bytes an element instead of 8.
  EXPECT_LE(buf.size(), kWireHeaderSize + k * 4 + 8 + k + k / 1000);
  EXPECT_EQ(buf.size(), EncodedSize(c));
  Compressed d;
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);
}

TEST(WireFormatTest, PathologicalGapsFallBackToExplicitIndices) {
  // 128 indices 2^24 apart: 4-byte varints, and 8 + 1 + 127 * 4 = 517 > 128 * 4 bytes.
  const int64_t n = cpu::kMaxElements;
  std::vector<int32_t> idx;
  for (int32_t i = 0; i < 128; ++i) idx.push_back(i << 24);
  Compressed c = SparseWith(idx, n, ValueType::kFloat16);
  EXPECT_EQ(EncodedSize(c), kWireHeaderSize + 128 * (2 + 4));
  std::vector<uint8_t> buf;
  ASSERT_THAT(Encode(c, &buf), IsOk());
  EXPECT_EQ(buf[6], 0);
  EXPECT_EQ(buf, ExplicitByHand(c));
  Compressed d;
  ASSERT_THAT(Decode(buf, &d), IsOk());
  ExpectSame(c, d);
  // A layout-3 message of the same set is still valid (only larger).
  const std::vector<uint8_t> delta = DeltaByHand(c, ReferenceVarints(c.indices));
  EXPECT_GT(delta.size(), buf.size());
  ASSERT_THAT(Decode(delta, &d), IsOk());
  ExpectSame(c, d);
}

TEST(WireFormatTest, DeltaCorruptionsAreRejectedByDecodeAndDecodeAdd) {
  constexpr int64_t kN = 1000;
  using Bytes = std::vector<uint8_t>;
  const Bytes prefix = {0x01, 0x02};  // indices 1 and 4, valid, before the bad varint
  struct Bad {
    const char* what;
    Bytes stream;    // after `prefix`; the bad varint is index 2
    int64_t count;   // varints the header announces
    bool fast_path;  // also run with eight valid varints after the bad one
    std::vector<std::string> substrings;
  };
  const std::vector<Bad> cases = {
      {"6-byte varint",
       {0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
       3,
       true,
       {"varint 2", "longer than 5 bytes"}},
      {"gap 2^31",
       {0x80, 0x80, 0x80, 0x80, 0x08},
       3,
       true,
       {"varint 2", "gap 2147483648", "overflows int32"}},
      {"gap 2^35 - 1",
       {0xff, 0xff, 0xff, 0xff, 0x7f},
       3,
       true,
       {"gap 34359738367", "overflows int32"}},
      {"index dense_size",
       {0xe3, 0x07},
       3,
       true,  // 5 + 995
       {"index 1000 at position 2", "[0, dense_size = 1000)"}},
      {"index far out",
       {0xff, 0xff, 0xff, 0xff, 0x07},
       3,
       true,
       {"index 2147483652 at position 2", "dense_size = 1000"}},
      {"not minimal", {0x85, 0x00}, 3, true, {"varint 2", "not minimally encoded"}},
      {"runs past", {0x85}, 3, false, {"varint 2", "runs past the end of the 3-byte"}},
      {"too few varints", {0x00}, 4, false, {"varint 3", "runs past the end"}},
      {"trailing byte",
       {0x00, 0x00},
       3,
       false,
       {"trailing bytes", "end at byte 3", "stream_bytes is 4"}},
  };
  for (const Bad& bad : cases) {
    // Without filler the bad varint is read by the byte loop near the stream's end; with eight
    // valid one-byte varints after it, by the 8-byte fast path.
    for (bool filler : {false, true}) {
      if (filler && !bad.fast_path) continue;
      SCOPED_TRACE(absl::StrFormat("%s, filler %d", bad.what, filler));
      Bytes stream = prefix;
      stream.insert(stream.end(), bad.stream.begin(), bad.stream.end());
      if (filler) stream.insert(stream.end(), 8, 0x00);
      const int64_t count = bad.count + (filler ? 8 : 0);
      Compressed c = SparseWith(std::vector<int32_t>(count, 0), kN, ValueType::kFloat32);
      const Bytes buf = DeltaByHand(c, stream);
      const absl::Status s = DecodeBoth(buf, kN);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      for (const std::string& sub : bad.substrings) {
        EXPECT_THAT(std::string(s.message()), HasSubstr(sub));
      }
    }
  }

  // Header-level corruptions of a valid layout-3 message.
  Compressed c = SparseWith({1, 4, 9, 300, 999}, kN, ValueType::kFloat16);
  const Bytes varints = ReferenceVarints(c.indices);
  const Bytes good = DeltaByHand(c, varints);
  ASSERT_THAT(DecodeBoth(good, kN), IsOk());
  const size_t length_at = kWireHeaderSize + 5 * 2;
  for (int64_t wrong : {int64_t{0}, static_cast<int64_t>(varints.size()) - 1,
                        static_cast<int64_t>(varints.size()) + 1, int64_t{1} << 40,
                        std::numeric_limits<int64_t>::max()}) {
    Bytes b = good;
    Poke<uint64_t>(&b, length_at, static_cast<uint64_t>(wrong));
    Reseal(&b);
    EXPECT_THAT(DecodeBoth(b, kN),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(absl::StrFormat("stream_bytes says the index stream has "
                                                         "%d bytes, buffer has %d",
                                                         wrong, varints.size())))));
  }
  // Every truncation: DataLoss, including a cut inside the stream_bytes field.
  for (size_t len = 0; len < good.size(); ++len) {
    ASSERT_THAT(DecodeBoth(absl::MakeConstSpan(good.data(), len), kN),
                StatusIs(absl::StatusCode::kDataLoss))
        << "truncated to " << len;
  }
  EXPECT_THAT(DecodeBoth(absl::MakeConstSpan(good.data(), length_at + 7), kN),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("implies at least 58 bytes")));
  Bytes b = good;
  b.back() ^= 0x01;  // a stream byte, checksum not resealed
  EXPECT_THAT(DecodeBoth(b, kN),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum mismatch")));
  b = good;
  Poke<uint64_t>(&b, 24, 9);
  Reseal(&b);
  EXPECT_THAT(DecodeBoth(b, kN), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seed")));
  b = good;
  Poke<uint16_t>(&b, kWireHeaderSize + 2 * 3, 0x7c00);  // +Inf at position 3
  Reseal(&b);
  EXPECT_THAT(DecodeBoth(b, kN), StatusIs(absl::StatusCode::kInvalidArgument,
                                          AllOf(HasSubstr("non-finite"), HasSubstr("position 3"))));
  b = good;
  Poke<int64_t>(&b, 16, 6);  // count 6: values and stream_bytes move, sizes disagree
  Reseal(&b);
  EXPECT_THAT(DecodeBoth(b, kN), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("size mismatch")));
}

TEST(WireFormatTest, DecodeAddMatchesDecodeThenDecompressAddForEveryLayout) {
  constexpr int64_t kN = 20000;
  for (ValueType type : {ValueType::kFloat32, ValueType::kFloat16, ValueType::kBFloat16}) {
    SCOPED_TRACE(cpu::ValueTypeName(type));
    Compressed sparse = SparseWith(RandomIndices(kN, 0.05, 7), kN, type);
    std::vector<uint8_t> delta;
    ASSERT_THAT(Encode(sparse, &delta), IsOk());
    ASSERT_EQ(delta[6], 3);
    std::vector<uint8_t> implicit, dense;
    ASSERT_THAT(Encode(Make(WireLayout::kSparseImplicit, type, kN, 1500), &implicit), IsOk());
    ASSERT_EQ(implicit[6], 1);
    ASSERT_THAT(Encode(Make(WireLayout::kDense, type, kN, kN), &dense), IsOk());
    ASSERT_EQ(dense[6], 2);
    const std::vector<uint8_t> explicit_buf = ExplicitByHand(sparse);
    for (float scale : {1.0f, 0.37f, -2.5f, 1e-30f, 0.0f}) {
      for (const std::vector<uint8_t>* buf : Buffers{&explicit_buf, &implicit, &dense, &delta}) {
        SCOPED_TRACE(absl::StrFormat("layout %d, scale %g", (*buf)[6], scale));
        ExpectDecodeAddMatches(*buf, kN, scale);
      }
    }
  }
}

// Found by fuzzing under UBSan (tests/fuzz/wire_format_fuzz.cc): an empty sparse tensor (count 0,
// explicit indices) made Decode and Encode memcpy to or from an empty vector's null data().
// The ASan+UBSan build (scripts/sanitize.sh) fails this test without the fix.
TEST(WireFormatTest, EmptySparseTensorRoundTripsThroughEveryPath) {
  Compressed empty{.dense_size = 10};
  std::vector<uint8_t> bytes;
  ASSERT_THAT(Encode(empty, &bytes), IsOk());
  EXPECT_EQ(bytes.size(), kWireHeaderSize);
  EXPECT_EQ(bytes[6], static_cast<uint8_t>(WireLayout::kSparseExplicit));
  Compressed back;
  back.indices = {1, 2};  // replaced
  ASSERT_THAT(Decode(bytes, &back), IsOk());
  EXPECT_EQ(back.dense_size, 10);
  EXPECT_TRUE(back.indices.empty());
  EXPECT_TRUE(back.values.empty());
  std::vector<float> out(10, 1.5f);
  ASSERT_THAT(DecodeAdd(bytes, 2.0f, absl::MakeSpan(out)), IsOk());
  EXPECT_EQ(out, std::vector<float>(10, 1.5f));
}

TEST(WireFormatTest, DecodeAddRejectsAWrongOutputSize) {
  constexpr int64_t kN = 500;
  std::vector<uint8_t> delta, implicit, dense;
  ASSERT_THAT(Encode(SparseWith({0, 3, 499}, kN, ValueType::kFloat32), &delta), IsOk());
  ASSERT_THAT(Encode(Make(WireLayout::kSparseImplicit, ValueType::kFloat32, kN, 20), &implicit),
              IsOk());
  ASSERT_THAT(Encode(Make(WireLayout::kDense, ValueType::kBFloat16, kN, kN), &dense), IsOk());
  const std::vector<uint8_t> explicit_buf =
      ExplicitByHand(SparseWith({0, 3, 499}, kN, ValueType::kFloat32));
  for (const std::vector<uint8_t>* buf : Buffers{&explicit_buf, &implicit, &dense, &delta}) {
    for (int64_t size : {kN - 1, kN + 1, int64_t{0}}) {
      const std::vector<float> before = Pattern(size);
      std::vector<float> out = before;
      EXPECT_THAT(DecodeAdd(*buf, 1.0f, absl::MakeSpan(out)),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           AllOf(HasSubstr(absl::StrFormat("output has %d elements", size)),
                                 HasSubstr("expected dense_size 500"))));
      ExpectSameBits(out, before);
    }
  }
}

}  // namespace
}  // namespace gravac::kernels
