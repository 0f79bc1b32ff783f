#include "kernels/wire_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#define XXH_INLINE_ALL  // header-only XXH64 (Debian libxxhash-dev)
#include <xxhash.h>

#include "absl/strings/str_format.h"
#include "core/status.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/check.h"
#include "kernels/cpu/randomk.h"
#include "kernels/cpu/scatter_add.h"
#include "kernels/varint_codec.h"

namespace gravac::kernels {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

namespace {

constexpr size_t kStreamBytesField = 8;  // layout 3: uint64 byte length of the varint stream

size_t ValueWidth(ValueType t) { return t == ValueType::kFloat32 ? 4 : 2; }

struct Plan {
  WireLayout layout;
  size_t stream_bytes = 0;  // layout 3 only
};

// `stream` is ScanGaps(c.indices).stream_bytes for explicit indices (unused otherwise).
Plan PlanOf(const CompressedView& c, size_t stream) {
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
  const uint64_t header_hash = XXH64(buf, 32, 0);
  return XXH64(buf + kWireHeaderSize, total - kWireHeaderSize, header_hash);
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
absl::Status CheckCompressed(const CompressedView& c, size_t* stream_bytes) {
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
    const internal::GapScan scan = internal::ScanGaps(c.indices, c.dense_size);
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

// Decodes and checks the layout-3 index stream of m (varint_codec.h).
template <typename F>
absl::Status ForEachDeltaIndex(const Message& m, const char* who, F&& f) {
  return internal::ForEachGapIndex(absl::MakeConstSpan(m.indices, m.stream_bytes), m.count,
                                   m.dense_size, who, std::forward<F>(f));
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
      // An empty tensor's vector has no storage: memcpy to nullptr is undefined even for 0 bytes.
      if (m.count > 0) {
        std::memcpy(out->indices.data(), m.indices, 4 * static_cast<size_t>(m.count));
      }
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

size_t EncodedSize(const Compressed& c) { return EncodedSize(ViewOf(c)); }

size_t EncodedSize(const CompressedView& c) {
  const size_t stream =
      c.dense || c.implicit_indices ? 0 : internal::ScanGaps(c.indices, c.dense_size).stream_bytes;
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
  out->clear();
  return EncodeAppend(ViewOf(c), out);
}

absl::Status Encode(const CompressedView& c, std::vector<uint8_t>* out) {
  out->clear();
  return EncodeAppend(c, out);
}

absl::Status EncodeAppend(const CompressedView& c, std::vector<uint8_t>* out) {
  size_t stream = 0;
  RETURN_IF_ERROR(CheckCompressed(c, &stream));
  const Plan plan = PlanOf(c, stream);
  const WireLayout layout = plan.layout;
  const size_t total = kWireHeaderSize + PayloadSize(plan, c.value_type, c.count());
  const size_t start = out->size();
  // PutGaps stores 8 bytes at a time: room for the last one's overhang, cut off at the end.
  out->resize(start + (layout == WireLayout::kSparseDelta ? total + 8 : total));
  uint8_t* buf = out->data() + start;
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
      out->resize(start);
      return absl::InvalidArgumentError(absl::StrFormat(
          "Encode: value %g at position %d is not a finite %s value (values must be finite and "
          "already rounded to the value type)",
          v, i, cpu::ValueTypeName(c.value_type)));
    }
  }
  p += count * ValueWidth(c.value_type);
  if (layout == WireLayout::kSparseExplicit) {
    if (!c.indices.empty()) std::memcpy(p, c.indices.data(), 4 * c.indices.size());
  } else if (layout == WireLayout::kSparseDelta) {
    Put<uint64_t>(p, plan.stream_bytes);
    internal::PutGaps(c.indices, p + kStreamBytesField);
    out->resize(start + total);
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
