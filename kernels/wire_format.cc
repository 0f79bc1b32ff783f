#include "kernels/wire_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/randomk.h"
#include "kernels/cpu/scatter_add.h"

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

constexpr size_t kStreamBytesField = 8;  // layout 3: uint64 byte length of the varint stream
constexpr size_t kMaxVarintBytes = 5;

size_t ValueWidth(ValueType t) { return t == ValueType::kFloat32 ? 4 : 2; }

// Bytes of the unsigned LEB128 encoding of x (branch-free, so the scan below vectorises).
uint32_t VarintLen(uint32_t x) {
  return 1 + static_cast<uint32_t>(x >= (1u << 7)) + static_cast<uint32_t>(x >= (1u << 14)) +
         static_cast<uint32_t>(x >= (1u << 21)) + static_cast<uint32_t>(x >= (1u << 28));
}

struct IndexScan {
  bool valid;           // strictly ascending and in [0, dense_size)
  size_t stream_bytes;  // bytes of the layout-3 varint stream (meaningful when valid)
};

// One branch-free pass: validity of explicit indices and the size of their varint stream.
IndexScan ScanIndices(absl::Span<const int32_t> idx, int64_t dense_size) {
  const size_t k = idx.size();
  if (k == 0) return {true, 0};
  const int32_t* p = idx.data();
  // Strictly ascending from p[0] >= 0 to p[k - 1] < dense_size puts every index in range.
  uint32_t bad = static_cast<uint32_t>(p[0] < 0 || p[k - 1] >= dense_size);
  size_t total = VarintLen(static_cast<uint32_t>(p[0]));
  // Fixed-size blocks (the loop that GCC's -O2 cost model vectorises), then the tail.
  constexpr size_t kBlock = 16;
  size_t i = 1;
  for (; i + kBlock <= k; i += kBlock) {
    uint32_t block_bad = 0, block_bytes = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      const int32_t cur = p[i + j], prev = p[i + j - 1];
      block_bad |= static_cast<uint32_t>(cur <= prev);
      block_bytes += VarintLen(static_cast<uint32_t>(cur) - static_cast<uint32_t>(prev) - 1);
    }
    bad |= block_bad;
    total += block_bytes;
  }
  for (; i < k; ++i) {
    bad |= static_cast<uint32_t>(p[i] <= p[i - 1]);
    total += VarintLen(static_cast<uint32_t>(p[i]) - static_cast<uint32_t>(p[i - 1]) - 1);
  }
  return {bad == 0, total};
}

// Writes x as a varint with one unaligned 8-byte store (p needs 8 writable bytes); returns the
// end of the varint.
uint8_t* PutVarint(uint8_t* p, uint32_t x) {
  const uint64_t v = x;
  uint64_t bytes = (v & 0x7f) | ((v << 1) & 0x7f00) | ((v << 2) & 0x7f0000) |
                   ((v << 3) & 0x7f000000) | ((v << 4) & 0xff00000000ull);
  const size_t len = VarintLen(x);
  bytes |= 0x0000008080808080ull & ((uint64_t{1} << (8 * (len - 1))) - 1);  // continuation bits
  std::memcpy(p, &bytes, 8);
  return p + len;
}

struct Plan {
  WireLayout layout;
  size_t stream_bytes = 0;  // layout 3 only
};

// `stream` is ScanIndices(c.indices).stream_bytes for explicit indices (unused otherwise).
Plan PlanOf(const Compressed& c, size_t stream) {
  if (c.dense) return {WireLayout::kDense};
  if (c.implicit_indices) return {WireLayout::kSparseImplicit};
  if (kStreamBytesField + stream < 4 * c.indices.size()) {
    return {WireLayout::kSparseDelta, stream};
  }
  return {WireLayout::kSparseExplicit};
}

size_t PayloadSize(const Plan& plan, ValueType type, int64_t count) {
  const size_t n = static_cast<size_t>(count);
  switch (plan.layout) {
    case WireLayout::kSparseExplicit:
      return n * ValueWidth(type) + n * 4;
    case WireLayout::kSparseDelta:
      return n * ValueWidth(type) + kStreamBytesField + plan.stream_bytes;
    case WireLayout::kSparseImplicit:
    case WireLayout::kDense:
      break;
  }
  return n * ValueWidth(type);
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

// Checks `count` little-endian int32 indices at `raw` (any alignment).
absl::Status CheckIndices(const uint8_t* raw, int64_t count, int64_t dense_size, const char* who) {
  for (int64_t i = 0; i < count; ++i) {
    const int32_t v = Get<int32_t>(raw + 4 * i);
    if (v < 0 || v >= dense_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: index %d at position %d is outside [0, dense_size = %d)", who, v, i, dense_size));
    }
    if (i > 0) {
      const int32_t prev = Get<int32_t>(raw + 4 * (i - 1));
      if (v <= prev) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: indices not strictly ascending: position %d holds %d after %d", who, i, v, prev));
      }
    }
  }
  return absl::OkStatus();
}

// Checks c for Encode; for explicit indices also sets *stream_bytes (else 0).
absl::Status CheckCompressed(const Compressed& c, size_t* stream_bytes) {
  *stream_bytes = 0;
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
    const IndexScan scan = ScanIndices(c.indices, c.dense_size);
    if (!scan.valid) {
      RETURN_IF_ERROR(CheckIndices(reinterpret_cast<const uint8_t*>(c.indices.data()), c.count(),
                                   c.dense_size, "Encode"));
      return absl::InternalError("Encode: index scan and index check disagree");
    }
    *stream_bytes = scan.stream_bytes;
  }
  return absl::OkStatus();
}

// A header that passed every check up to and including the checksum.
struct Message {
  WireLayout layout;
  ValueType type;
  int64_t dense_size;
  int64_t count;
  uint64_t seed;
  const uint8_t* values;   // count values of `type`
  const uint8_t* indices;  // layout 0: count int32; layout 3: the varint stream; else null
  size_t stream_bytes;     // layout 3
};

absl::Status ParseMessage(absl::Span<const uint8_t> in, const char* who, Message* m) {
  if (in.size() < kWireHeaderSize) {
    return absl::DataLossError(
        absl::StrFormat("%s: buffer of %d bytes is shorter than the %d-byte header", who, in.size(),
                        kWireHeaderSize));
  }
  const uint8_t* buf = in.data();
  if (uint32_t magic = Get<uint32_t>(buf); magic != kWireMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad magic 0x%08x, expected 0x%08x", who, magic, kWireMagic));
  }
  if (uint16_t version = Get<uint16_t>(buf + 4); version != kWireVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unsupported version %d, expected %d", who, version, kWireVersion));
  }
  if (buf[6] > static_cast<uint8_t>(WireLayout::kSparseDelta)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad layout %d, expected 0 (sparse explicit), 1 (sparse implicit), 2 "
                        "(dense) or 3 (sparse delta)",
                        who, buf[6]));
  }
  if (buf[7] > static_cast<uint8_t>(ValueType::kBFloat16)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: bad value type %d, expected 0 (fp32), 1 (fp16) or 2 (bf16)", who, buf[7]));
  }
  m->layout = static_cast<WireLayout>(buf[6]);
  m->type = static_cast<ValueType>(buf[7]);
  m->dense_size = Get<int64_t>(buf + 8);
  m->count = Get<int64_t>(buf + 16);
  m->seed = Get<uint64_t>(buf + 24);
  if (m->dense_size < 0 || m->dense_size > cpu::kMaxElements) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: dense_size %d is outside [0, %d]", who,
                                                      m->dense_size, cpu::kMaxElements));
  }
  if (m->count < 0 || m->count > m->dense_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: count %d is outside [0, dense_size = %d]", who, m->count, m->dense_size));
  }
  if (m->layout == WireLayout::kDense && m->count != m->dense_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dense layout needs count == dense_size, got count %d, dense_size %d",
                        who, m->count, m->dense_size));
  }
  if (m->layout != WireLayout::kSparseImplicit && m->seed != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: seed must be 0 outside the implicit-index layout, got 0x%016x", who, m->seed));
  }
  const size_t values_end = kWireHeaderSize + static_cast<size_t>(m->count) * ValueWidth(m->type);
  m->values = buf + kWireHeaderSize;
  m->indices = nullptr;
  m->stream_bytes = 0;
  if (m->layout == WireLayout::kSparseDelta) {
    const size_t stream_at = values_end + kStreamBytesField;
    if (in.size() < stream_at) {
      return absl::DataLossError(absl::StrFormat(
          "%s: size mismatch: header (layout 3, %s, count %d) implies at least %d bytes, buffer "
          "has %d",
          who, cpu::ValueTypeName(m->type), m->count, stream_at, in.size()));
    }
    const uint64_t stream_bytes = Get<uint64_t>(buf + values_end);
    if (stream_bytes != in.size() - stream_at) {
      return absl::DataLossError(absl::StrFormat(
          "%s: size mismatch: stream_bytes says the index stream has %d bytes, buffer has %d "
          "after the %d bytes before it",
          who, stream_bytes, in.size() - stream_at, stream_at));
    }
    m->indices = buf + stream_at;
    m->stream_bytes = static_cast<size_t>(stream_bytes);
  } else {
    const size_t expected = kWireHeaderSize + PayloadSize({m->layout}, m->type, m->count);
    if (in.size() != expected) {
      return absl::DataLossError(
          absl::StrFormat("%s: size mismatch: header (layout %d, %s, count %d) implies %d "
                          "bytes, buffer has %d",
                          who, buf[6], cpu::ValueTypeName(m->type), m->count, expected, in.size()));
    }
    if (m->layout == WireLayout::kSparseExplicit) m->indices = buf + values_end;
  }
  uint64_t stored = Get<uint64_t>(buf + 32);
  if (uint64_t actual = Checksum(buf, in.size()); stored != actual) {
    return absl::DataLossError(
        absl::StrFormat("%s: checksum mismatch: header says 0x%016x, payload hashes to 0x%016x",
                        who, stored, actual));
  }
  return absl::OkStatus();
}

// The error for varint i at stream byte pos: n bytes (> 5: too long), gap, resulting index.
absl::Status DeltaIndexError(const Message& m, const char* who, int64_t i, size_t pos, size_t n,
                             uint64_t gap, int64_t index, bool last_zero) {
  if (n > kMaxVarintBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d is longer than %d bytes", who, i, pos, kMaxVarintBytes));
  }
  if (last_zero) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d is not minimally encoded (%d bytes, last is 0)", who, i,
        pos, n));
  }
  if (gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: varint %d at stream byte %d holds gap %d, which overflows int32 (max %d)", who, i, pos,
        gap, std::numeric_limits<int32_t>::max()));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: index %d at position %d is outside [0, dense_size = %d)", who, index, i, m.dense_size));
}

// Decodes the layout-3 varint stream, calling f(i, index) for each of the count indices in
// order, and checks it completely (see the header comment). f is called for indices already
// checked, so on error the calls made so far were for valid indices only.
template <typename F>
absl::Status ForEachDeltaIndex(const Message& m, const char* who, F&& f) {
  const uint8_t* s = m.indices;
  const size_t len = m.stream_bytes;
  size_t pos = 0;
  int64_t next = 0;  // previous index + 1
  int64_t i = 0;
  while (i < m.count) {
    uint64_t w = 0;
    if (len - pos >= 8) {
      w = Get<uint64_t>(s + pos);
      // Eight one-byte varints (gaps < 128, the common case at mean gap <= ~30): indices only
      // grow, so checking the last one against dense_size checks all eight.
      if ((w & 0x8080808080808080ull) == 0 && m.count - i >= 8) {
        int64_t block[8];
        int64_t x = next;
        for (int j = 0; j < 8; ++j) {
          block[j] = x + static_cast<int64_t>((w >> (8 * j)) & 0x7f);
          x = block[j] + 1;
        }
        if (block[7] < m.dense_size) {
          for (int j = 0; j < 8; ++j) f(i + j, static_cast<int32_t>(block[j]));
          i += 8;
          pos += 8;
          next = x;
          continue;
        }
        // else: one by one below, to report the first index out of range
      }
    }
    uint64_t gap;
    size_t n;
    int64_t index;
    if (len - pos >= 8) {
      // Branch-free decode of one varint; one well-predicted test for every error.
      const uint64_t stops = ~w & 0x8080808080ull;  // bytes 0..4 without a continuation bit
      n = static_cast<size_t>(std::countr_zero(stops | (uint64_t{1} << 47))) / 8 + 1;  // 6: none
      const uint64_t mask = (uint64_t{1} << (8 * n)) - 1;
      const uint64_t v = w & mask;
      gap = (v & 0x7f) | ((v >> 1) & 0x3f80) | ((v >> 2) & 0x1fc000) | ((v >> 3) & 0xfe00000) |
            ((v >> 4) & 0x7f0000000ull);
      index = next + static_cast<int64_t>(gap);
      const bool last_zero = n > 1 && ((v >> (8 * (n - 1))) & 0xff) == 0;
      if (n > kMaxVarintBytes || last_zero ||
          gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ||
          index >= m.dense_size) {
        return DeltaIndexError(m, who, i, pos, n, gap, index, last_zero);
      }
    } else {
      gap = 0;
      n = 0;
      uint8_t b = 0;
      do {
        if (n == kMaxVarintBytes) break;
        if (pos + n >= len) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: varint %d at stream byte %d runs past the end of the %d-byte index stream", who,
              i, pos, len));
        }
        b = s[pos + n];
        gap |= static_cast<uint64_t>(b & 0x7f) << (7 * n);
        ++n;
      } while (b & 0x80);
      if (n == kMaxVarintBytes && (b & 0x80)) ++n;  // a sixth byte follows
      index = next + static_cast<int64_t>(gap);
      const bool last_zero = n > 1 && n <= kMaxVarintBytes && s[pos + n - 1] == 0;
      if (n > kMaxVarintBytes || last_zero ||
          gap > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ||
          index >= m.dense_size) {
        return DeltaIndexError(m, who, i, pos, n, gap, index, last_zero);
      }
    }
    f(i, static_cast<int32_t>(index));
    next = index + 1;
    pos += n;
    ++i;
  }
  if (pos != len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: trailing bytes in the index stream: the %d varints end at byte %d, stream_bytes is %d",
        who, m.count, pos, len));
  }
  return absl::OkStatus();
}

template <ValueType T>
float LoadValue(const uint8_t* p, int64_t i) {
  if constexpr (T == ValueType::kFloat32) {
    return Get<float>(p + 4 * i);
  } else if constexpr (T == ValueType::kFloat16) {
    return cpu::HalfToFloat(Get<uint16_t>(p + 2 * i));
  } else {
    return cpu::BFloat16ToFloat(Get<uint16_t>(p + 2 * i));
  }
}

float LoadValue(ValueType t, const uint8_t* p, int64_t i) {
  switch (t) {
    case ValueType::kFloat16:
      return LoadValue<ValueType::kFloat16>(p, i);
    case ValueType::kBFloat16:
      return LoadValue<ValueType::kBFloat16>(p, i);
    case ValueType::kFloat32:
      break;
  }
  return LoadValue<ValueType::kFloat32>(p, i);
}

absl::Status NonFiniteValue(const char* who, float v, int64_t i) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: non-finite value %g at position %d", who, v, i));
}

// Everything of Decode after ParseMessage.
absl::Status DecodeBody(const Message& m, const char* who, Compressed* out) {
  out->dense_size = m.dense_size;
  out->dense = m.layout == WireLayout::kDense;
  out->value_type = m.type;
  out->implicit_indices = m.layout == WireLayout::kSparseImplicit;
  out->seed = m.seed;
  out->values.resize(static_cast<size_t>(m.count));
  for (int64_t i = 0; i < m.count; ++i) {
    const float v = LoadValue(m.type, m.values, i);
    if (!std::isfinite(v)) return NonFiniteValue(who, v, i);
    out->values[i] = v;
  }
  switch (m.layout) {
    case WireLayout::kDense:
      out->indices.clear();
      return absl::OkStatus();
    case WireLayout::kSparseImplicit:
      return cpu::RandomKIndices(m.dense_size, m.count, m.seed, &out->indices);
    case WireLayout::kSparseExplicit:
      out->indices.resize(static_cast<size_t>(m.count));
      std::memcpy(out->indices.data(), m.indices, 4 * static_cast<size_t>(m.count));
      return CheckIndices(m.indices, m.count, m.dense_size, who);
    case WireLayout::kSparseDelta: {
      out->indices.resize(static_cast<size_t>(m.count));
      int32_t* idx = out->indices.data();
      return ForEachDeltaIndex(m, who, [idx](int64_t i, int32_t index) { idx[i] = index; });
    }
  }
  return absl::InternalError(absl::StrFormat("%s: unreachable layout", who));
}

// DecodeAdd for layouts 0, 2 and 3 with values of type T: a validating pass over the message,
// then the add pass (same products and order as cpu::DecompressAdd).
template <ValueType T>
absl::Status DecodeAddDirect(const Message& m, float scale, float* o) {
  constexpr const char* kWho = "DecodeAdd";
  for (int64_t i = 0; i < m.count; ++i) {
    const float v = LoadValue<T>(m.values, i);
    if (!std::isfinite(v)) return NonFiniteValue(kWho, v, i);
  }
  switch (m.layout) {
    case WireLayout::kDense:
      for (int64_t i = 0; i < m.count; ++i) o[i] += scale * LoadValue<T>(m.values, i);
      return absl::OkStatus();
    case WireLayout::kSparseExplicit:
      RETURN_IF_ERROR(CheckIndices(m.indices, m.count, m.dense_size, kWho));
      for (int64_t i = 0; i < m.count; ++i) {
        o[Get<int32_t>(m.indices + 4 * i)] += scale * LoadValue<T>(m.values, i);
      }
      return absl::OkStatus();
    case WireLayout::kSparseDelta:
      RETURN_IF_ERROR(ForEachDeltaIndex(m, kWho, [](int64_t, int32_t) {}));
      return ForEachDeltaIndex(m, kWho, [&](int64_t i, int32_t index) {
        o[index] += scale * LoadValue<T>(m.values, i);
      });
    case WireLayout::kSparseImplicit:
      break;
  }
  return absl::InternalError("DecodeAdd: layout 1 reached the direct path");
}

}  // namespace

size_t EncodedSize(const Compressed& c) {
  const size_t stream =
      c.dense || c.implicit_indices ? 0 : ScanIndices(c.indices, c.dense_size).stream_bytes;
  return kWireHeaderSize + PayloadSize(PlanOf(c, stream), c.value_type, c.count());
}

size_t SparseEncodedSizeBound(int64_t dense_size, int64_t count, ValueType type,
                              bool implicit_indices) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(count, 0));
  const size_t values = kWireHeaderSize + n * ValueWidth(type);
  if (implicit_indices || n == 0) return values;
  const double per_gap =
      1.0 + std::log2(static_cast<double>(std::max(dense_size, count)) / static_cast<double>(n)) / 7.0;
  const auto stream = static_cast<size_t>(std::ceil(static_cast<double>(n) * per_gap));
  return values + std::min(4 * n, kStreamBytesField + stream);
}

absl::Status Encode(const Compressed& c, std::vector<uint8_t>* out) {
  size_t stream = 0;
  RETURN_IF_ERROR(CheckCompressed(c, &stream));
  const Plan plan = PlanOf(c, stream);
  const WireLayout layout = plan.layout;
  const size_t total = kWireHeaderSize + PayloadSize(plan, c.value_type, c.count());
  // PutVarint stores 8 bytes at a time: room for the last one's overhang, cut off at the end.
  out->resize(layout == WireLayout::kSparseDelta ? total + 8 : total);
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
  p += count * ValueWidth(c.value_type);
  if (layout == WireLayout::kSparseExplicit) {
    std::memcpy(p, c.indices.data(), 4 * c.indices.size());
  } else if (layout == WireLayout::kSparseDelta) {
    Put<uint64_t>(p, plan.stream_bytes);
    uint8_t* q = p + kStreamBytesField;
    uint32_t next = 0;
    for (int32_t v : c.indices) {
      const uint32_t gap = static_cast<uint32_t>(v) - next;
      if (gap < 0x80) {
        *q++ = static_cast<uint8_t>(gap);  // the common case: mean gap = theta
      } else {
        q = PutVarint(q, gap);
      }
      next = static_cast<uint32_t>(v) + 1;
    }
    out->resize(total);
  }
  Put<uint64_t>(buf + 32, Checksum(buf, total));
  return absl::OkStatus();
}

absl::Status Decode(absl::Span<const uint8_t> in, Compressed* out) {
  Message m;
  RETURN_IF_ERROR(ParseMessage(in, "Decode", &m));
  return DecodeBody(m, "Decode", out);
}

absl::Status DecodeAdd(absl::Span<const uint8_t> in, float scale, absl::Span<float> out) {
  Message m;
  RETURN_IF_ERROR(ParseMessage(in, "DecodeAdd", &m));
  if (static_cast<int64_t>(out.size()) != m.dense_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DecodeAdd: output has %d elements, expected dense_size %d", out.size(), m.dense_size));
  }
  switch (m.type) {
    case ValueType::kFloat32:
      break;
    case ValueType::kFloat16:
      if (m.layout != WireLayout::kSparseImplicit) {
        return DecodeAddDirect<ValueType::kFloat16>(m, scale, out.data());
      }
      break;
    case ValueType::kBFloat16:
      if (m.layout != WireLayout::kSparseImplicit) {
        return DecodeAddDirect<ValueType::kBFloat16>(m, scale, out.data());
      }
      break;
  }
  if (m.layout != WireLayout::kSparseImplicit) {
    return DecodeAddDirect<ValueType::kFloat32>(m, scale, out.data());
  }
  // Implicit indices exist only after the O(dense_size) regeneration: decode, then add.
  Compressed c;
  RETURN_IF_ERROR(DecodeBody(m, "DecodeAdd", &c));
  return cpu::DecompressAdd(c, scale, out);
}

}  // namespace gravac::kernels
