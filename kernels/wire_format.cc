#include "kernels/wire_format.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/randomk.h"

namespace gravac::kernels {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

namespace internal {
namespace {

constexpr uint64_t kP1 = 11400714785074694791ull;
constexpr uint64_t kP2 = 14029467366897019727ull;
constexpr uint64_t kP3 = 1609587929392839161ull;
constexpr uint64_t kP4 = 9650029242287828579ull;
constexpr uint64_t kP5 = 2870177450012600261ull;

uint64_t Read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t Read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Round(uint64_t acc, uint64_t input) { return std::rotl(acc + input * kP2, 31) * kP1; }
uint64_t MergeRound(uint64_t acc, uint64_t val) { return (acc ^ Round(0, val)) * kP1 + kP4; }

}  // namespace

uint64_t XxHash64(absl::Span<const uint8_t> data, uint64_t seed) {
  const uint8_t* p = data.data();
  const size_t len = data.size();
  const uint8_t* end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; end - p >= 32; p += 32) {
      v1 = Round(v1, Read64(p));
      v2 = Round(v2, Read64(p + 8));
      v3 = Round(v3, Read64(p + 16));
      v4 = Round(v4, Read64(p + 24));
    }
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = MergeRound(MergeRound(MergeRound(MergeRound(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(len);
  for (; end - p >= 8; p += 8) h = std::rotl(h ^ Round(0, Read64(p)), 27) * kP1 + kP4;
  if (end - p >= 4) {
    h = std::rotl(h ^ (static_cast<uint64_t>(Read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = std::rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace internal

namespace {

size_t ValueWidth(ValueType t) { return t == ValueType::kFloat32 ? 4 : 2; }

WireLayout LayoutOf(const Compressed& c) {
  if (c.dense) return WireLayout::kDense;
  return c.implicit_indices ? WireLayout::kSparseImplicit : WireLayout::kSparseExplicit;
}

size_t PayloadSize(WireLayout layout, ValueType type, int64_t count) {
  size_t n = static_cast<size_t>(count);
  return n * ValueWidth(type) + (layout == WireLayout::kSparseExplicit ? n * 4 : 0);
}

uint64_t Checksum(const uint8_t* buf, size_t total) {
  uint64_t header_hash = internal::XxHash64(absl::MakeConstSpan(buf, 32), 0);
  return internal::XxHash64(absl::MakeConstSpan(buf + kWireHeaderSize, total - kWireHeaderSize),
                            header_hash);
}

template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

absl::Status CheckIndices(absl::Span<const int32_t> idx, int64_t dense_size, const char* who) {
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= dense_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: index %d at position %d is outside [0, dense_size = %d)", who,
                          idx[i], i, dense_size));
    }
    if (i > 0 && idx[i] <= idx[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: indices not strictly ascending: position %d holds %d after %d", who,
                          i, idx[i], idx[i - 1]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCompressed(const Compressed& c) {
  if (c.dense_size < 0 || c.dense_size > cpu::kMaxElements) {
    return absl::InvalidArgumentError(absl::StrFormat("Encode: dense_size %d is outside [0, %d]",
                                                      c.dense_size, cpu::kMaxElements));
  }
  if (c.value_type != ValueType::kFloat32 && c.value_type != ValueType::kFloat16 &&
      c.value_type != ValueType::kBFloat16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Encode: unknown value type %d", static_cast<int>(c.value_type)));
  }
  if (c.dense) {
    if (c.implicit_indices || c.count() != c.dense_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Encode: a dense tensor needs dense_size values and no implicit indices, got %d values "
          "for dense_size %d",
          c.count(), c.dense_size));
    }
  } else if (c.count() > c.dense_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Encode: count %d > dense_size %d", c.count(), c.dense_size));
  } else if (!c.implicit_indices) {
    if (c.indices.size() != c.values.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("Encode: %d indices for %d values", c.indices.size(), c.values.size()));
    }
    return CheckIndices(c.indices, c.dense_size, "Encode");
  }
  return absl::OkStatus();
}

}  // namespace

size_t EncodedSize(const Compressed& c) {
  return kWireHeaderSize + PayloadSize(LayoutOf(c), c.value_type, c.count());
}

absl::Status Encode(const Compressed& c, std::vector<uint8_t>* out) {
  if (absl::Status s = CheckCompressed(c); !s.ok()) return s;
  const WireLayout layout = LayoutOf(c);
  const size_t total = EncodedSize(c);
  out->resize(total);
  uint8_t* buf = out->data();
  Put<uint32_t>(buf, kWireMagic);
  Put<uint16_t>(buf + 4, kWireVersion);
  buf[6] = static_cast<uint8_t>(layout);
  buf[7] = static_cast<uint8_t>(c.value_type);
  Put<int64_t>(buf + 8, c.dense_size);
  Put<int64_t>(buf + 16, c.count());
  Put<uint64_t>(buf + 24, layout == WireLayout::kSparseImplicit ? c.seed : 0);
  Put<uint64_t>(buf + 32, 0);
  uint8_t* p = buf + kWireHeaderSize;
  const int64_t count = c.count();
  for (int64_t i = 0; i < count; ++i) {
    const float v = c.values[i];
    bool exact;
    if (c.value_type == ValueType::kFloat32) {
      Put<float>(p + 4 * i, v);
      exact = std::isfinite(v);
    } else {
      uint16_t h =
          c.value_type == ValueType::kFloat16 ? cpu::FloatToHalf(v) : cpu::FloatToBFloat16(v);
      Put<uint16_t>(p + 2 * i, h);
      float back =
          c.value_type == ValueType::kFloat16 ? cpu::HalfToFloat(h) : cpu::BFloat16ToFloat(h);
      exact = std::isfinite(back) && std::bit_cast<uint32_t>(back) == std::bit_cast<uint32_t>(v);
    }
    if (!exact) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Encode: value %g at position %d is not a finite %s value (values must be finite and "
          "already rounded to the value type)",
          v, i, cpu::ValueTypeName(c.value_type)));
    }
  }
  if (layout == WireLayout::kSparseExplicit) {
    std::memcpy(p + count * ValueWidth(c.value_type), c.indices.data(), 4 * c.indices.size());
  }
  Put<uint64_t>(buf + 32, Checksum(buf, total));
  return absl::OkStatus();
}

absl::Status Decode(absl::Span<const uint8_t> in, Compressed* out) {
  if (in.size() < kWireHeaderSize) {
    return absl::DataLossError(
        absl::StrFormat("Decode: buffer of %d bytes is shorter than the %d-byte header", in.size(),
                        kWireHeaderSize));
  }
  const uint8_t* buf = in.data();
  if (uint32_t magic = Get<uint32_t>(buf); magic != kWireMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Decode: bad magic 0x%08x, expected 0x%08x", magic, kWireMagic));
  }
  if (uint16_t version = Get<uint16_t>(buf + 4); version != kWireVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Decode: unsupported version %d, expected %d", version, kWireVersion));
  }
  if (buf[6] > static_cast<uint8_t>(WireLayout::kDense)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Decode: bad layout %d, expected 0 (sparse explicit), 1 (sparse "
                        "implicit) or 2 (dense)",
                        buf[6]));
  }
  if (buf[7] > static_cast<uint8_t>(ValueType::kBFloat16)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Decode: bad value type %d, expected 0 (fp32), 1 (fp16) or 2 (bf16)", buf[7]));
  }
  const auto layout = static_cast<WireLayout>(buf[6]);
  const auto type = static_cast<ValueType>(buf[7]);
  const int64_t dense_size = Get<int64_t>(buf + 8);
  const int64_t count = Get<int64_t>(buf + 16);
  const uint64_t seed = Get<uint64_t>(buf + 24);
  if (dense_size < 0 || dense_size > cpu::kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Decode: dense_size %d is outside [0, %d]", dense_size, cpu::kMaxElements));
  }
  if (count < 0 || count > dense_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Decode: count %d is outside [0, dense_size = %d]", count, dense_size));
  }
  if (layout == WireLayout::kDense && count != dense_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Decode: dense layout needs count == dense_size, got count %d, dense_size %d", count,
        dense_size));
  }
  if (layout != WireLayout::kSparseImplicit && seed != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Decode: seed must be 0 outside the implicit-index layout, got 0x%016x", seed));
  }
  const size_t expected = kWireHeaderSize + PayloadSize(layout, type, count);
  if (in.size() != expected) {
    return absl::DataLossError(absl::StrFormat(
        "Decode: size mismatch: header (layout %d, %s, count %d) implies %d bytes, buffer has %d",
        buf[6], cpu::ValueTypeName(type), count, expected, in.size()));
  }
  uint64_t stored = Get<uint64_t>(buf + 32);
  if (uint64_t actual = Checksum(buf, in.size()); stored != actual) {
    return absl::DataLossError(
        absl::StrFormat("Decode: checksum mismatch: header says 0x%016x, payload hashes to 0x%016x",
                        stored, actual));
  }
  out->dense_size = dense_size;
  out->dense = layout == WireLayout::kDense;
  out->value_type = type;
  out->implicit_indices = layout == WireLayout::kSparseImplicit;
  out->seed = seed;
  out->values.resize(static_cast<size_t>(count));
  const uint8_t* p = buf + kWireHeaderSize;
  for (int64_t i = 0; i < count; ++i) {
    float v = type == ValueType::kFloat32   ? Get<float>(p + 4 * i)
              : type == ValueType::kFloat16 ? cpu::HalfToFloat(Get<uint16_t>(p + 2 * i))
                                            : cpu::BFloat16ToFloat(Get<uint16_t>(p + 2 * i));
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("Decode: non-finite value %g at position %d", v, i));
    }
    out->values[i] = v;
  }
  switch (layout) {
    case WireLayout::kDense:
      out->indices.clear();
      return absl::OkStatus();
    case WireLayout::kSparseImplicit:
      return cpu::RandomKIndices(dense_size, count, seed, &out->indices);
    case WireLayout::kSparseExplicit:
      out->indices.resize(static_cast<size_t>(count));
      std::memcpy(out->indices.data(), p + count * ValueWidth(type), 4 * count);
      return CheckIndices(out->indices, dense_size, "Decode");
  }
  return absl::InternalError("Decode: unreachable layout");
}

}  // namespace gravac::kernels
