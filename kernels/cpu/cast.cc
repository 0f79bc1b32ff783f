#include "kernels/cpu/cast.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cpu/check.h"

namespace gravac::kernels::cpu {
namespace {

// The conversions below are branch-free (selects only) so the loops over tensors vectorise. Each
// computes both the normal-range and the subnormal-range result: in the fp16 subnormal range,
// fl(|x| + 0.5f) rounds |x| to a multiple of 2^-24 with ties to even (0.5f's ulp is 2^-24), which
// needs only IEEE round-to-nearest float addition (no -ffast-math; FTZ/DAZ cannot matter since
// fp32 subnormals round to 0 in fp16 either way).

inline uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }
inline float Float(uint32_t b) { return std::bit_cast<float>(b); }

// float(half(x)).
inline float RoundHalf(float x) {
  const uint32_t b = Bits(x);
  const uint32_t a = b & 0x7fffffffu;
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
  normal = normal >= 0x47800000u ? 0x7f800000u : normal;  // >= 65520 rounds to 2^16: Inf
  const uint32_t sub = Bits((Float(a) + 0.5f) - 0.5f);
  const uint32_t r = a >= 0x7f800000u ? a : (a >= 0x38800000u ? normal : sub);
  return Float((b & 0x80000000u) | r);
}

// float(bf16(x)).
inline float RoundBFloat16(float x) {
  const uint32_t b = Bits(x);
  const uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  return (b & 0x7fffffffu) > 0x7f800000u ? x : Float(r);
}

inline uint32_t NonFinite(float r) { return (Bits(r) & 0x7f800000u) == 0x7f800000u; }

// Rounds src[i] to `type` into dst[i] for every i in [0, n) (dst may equal src); returns the
// first position whose input is non-finite or whose rounded value is infinite, or -1.
int64_t RoundRange(ValueType type, const float* src, float* dst, int64_t n) {
  constexpr int64_t kBlock = 4096;
  int64_t first_bad = -1;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    uint32_t any = 0;
    if (type == ValueType::kFloat16) {
      for (int64_t i = b; i < e; ++i) {
        dst[i] = RoundHalf(src[i]);
        any |= NonFinite(dst[i]);
      }
    } else if (type == ValueType::kBFloat16) {
      for (int64_t i = b; i < e; ++i) {
        dst[i] = RoundBFloat16(src[i]);
        any |= NonFinite(dst[i]);
      }
    } else {
      for (int64_t i = b; i < e; ++i) {
        dst[i] = src[i];
        any |= NonFinite(dst[i]);
      }
    }
    if (any != 0 && first_bad < 0) {
      for (int64_t i = b; i < e && first_bad < 0; ++i) {
        if (NonFinite(dst[i])) first_bad = i;
      }
    }
  }
  return first_bad;
}

absl::Status BadValueError(ValueType type, std::string_view tensor_name, int64_t index,
                           float value) {
  if (!std::isfinite(value)) return NonFiniteError(tensor_name, index, value);
  return absl::InvalidArgumentError(
      absl::StrFormat("tensor '%s': value %g at index %d overflows %s (largest finite %s is %g)",
                      tensor_name, value, index, ValueTypeName(type), ValueTypeName(type),
                      type == ValueType::kFloat16 ? 65504.0 : 3.3895313892515355e38));
}

}  // namespace

uint16_t FloatToHalf(float x) {
  const uint32_t b = Bits(x);
  const uint32_t a = b & 0x7fffffffu;
  uint32_t normal = ((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10);  // rebias 127 -> 15
  normal = normal > 0x7c00u ? 0x7c00u : normal;
  const uint32_t sub = Bits(Float(a) + 0.5f) - 0x3f000000u;  // multiples of 2^-24 above 0.5
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t h = a > 0x7f800000u ? nan : (a >= 0x38800000u ? normal : sub);
  return static_cast<uint16_t>(((b >> 16) & 0x8000u) | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = h & 0x7c00u;
  const uint32_t m = h & 0x3ffu;
  const uint32_t normal = (static_cast<uint32_t>(h & 0x7fffu) << 13) + 0x38000000u;
  const uint32_t special = 0x7f800000u | (m << 13);
  const uint32_t sub = Bits(static_cast<float>(m) * 0x1p-24f);  // exact
  return Float(sign | (e == 0x7c00u ? special : (e == 0 ? sub : normal)));
}

uint16_t FloatToBFloat16(float x) {
  const uint32_t b = Bits(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

float BFloat16ToFloat(uint16_t b) { return Float(static_cast<uint32_t>(b) << 16); }

std::string_view ValueTypeName(ValueType type) {
  constexpr std::string_view kNames[] = {"fp32", "fp16", "bf16"};  // by ValueType value
  const auto i = static_cast<size_t>(type);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

void RoundToValueType(ValueType type, absl::Span<float> values) {
  if (type == ValueType::kFloat32) return;
  RoundRange(type, values.data(), values.data(), static_cast<int64_t>(values.size()));
}

absl::Status RoundToValueTypeChecked(ValueType type, absl::Span<float> values,
                                     std::string_view tensor_name,
                                     absl::Span<const int32_t> indices) {
  if (!indices.empty() && indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s': %d indices for %d values",
                                                      tensor_name, indices.size(), values.size()));
  }
  const int64_t n = static_cast<int64_t>(values.size());
  constexpr int64_t kBlock = 1024;
  float original[kBlock];  // keeps the input of a block, for the message
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    std::copy_n(values.data() + b, len, original);
    const int64_t bad = RoundRange(type, original, values.data() + b, len);
    if (bad >= 0) {
      const int64_t pos = b + bad;
      return BadValueError(type, tensor_name, indices.empty() ? pos : indices[pos], original[bad]);
    }
  }
  return absl::OkStatus();
}

CastCompressor::CastCompressor(ValueType type, const CompressorOptions& options)
    : type_(type), options_(options) {}

std::string_view CastCompressor::name() const {
  return type_ == ValueType::kBFloat16 ? "bf16" : "fp16";
}

absl::Status CastCompressor::Compress(absl::Span<const float> input, double /*theta*/,
                                      const CompressContext& ctx, Compressed* out) {
  if (type_ == ValueType::kFloat32) {
    return absl::InvalidArgumentError("CastCompressor: value type must be fp16 or bf16");
  }
  int64_t n = static_cast<int64_t>(input.size());
  if (absl::Status s = CheckSize(n, ctx.tensor_name); !s.ok()) return s;
  out->dense_size = n;
  out->dense = true;
  out->value_type = type_;
  out->implicit_indices = false;
  out->seed = 0;
  out->indices.clear();
  out->values.resize(static_cast<size_t>(n));
  int64_t bad = -1;
  if (options_.pool == nullptr) {
    bad = RoundRange(type_, input.data(), out->values.data(), n);
  } else {
    std::vector<int64_t> per_lane(options_.pool->size(), -1);
    options_.pool->ParallelFor(n, 1 << 16, [&](int lane, int64_t begin, int64_t end) {
      int64_t b = RoundRange(type_, input.data() + begin, out->values.data() + begin, end - begin);
      per_lane[lane] = b < 0 ? -1 : begin + b;
    });
    for (int64_t b : per_lane) {  // lanes hold chunks in order: the first hit is the lowest
      if (b >= 0) {
        bad = b;
        break;
      }
    }
  }
  if (bad >= 0) return BadValueError(type_, ctx.tensor_name, bad, input[bad]);
  return absl::OkStatus();
}

absl::Status CastCompressor::CompressFrom(const Compressed& first, double /*theta*/,
                                          const CompressContext& ctx, Compressed* out) {
  if (!first.dense || first.value_type != type_ || first.count() != first.dense_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': %s CompressFrom needs a dense %s output of the first level",
                        ctx.tensor_name, name(), ValueTypeName(type_)));
  }
  if (out != &first) *out = first;
  return absl::OkStatus();
}

}  // namespace gravac::kernels::cpu
