#include "daemon/collectives/reduce.h"

#include <bit>
#include <cmath>

namespace gravac::collectives {
namespace {

template <typename Widen, typename Narrow>
void SumInto16(uint16_t* dst, const uint16_t* src, size_t count, Widen widen, Narrow narrow) {
  for (size_t i = 0; i < count; ++i) dst[i] = narrow(widen(dst[i]) + widen(src[i]));
}

}  // namespace

size_t DataTypeSize(DataType type) { return type == DataType::kFloat32 ? 4 : 2; }

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kFloat16:
      return "fp16";
    case DataType::kBFloat16:
      return "bf16";
  }
  return "?";
}

std::string_view ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "average"; }

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // Inf or NaN (NaN kept quiet, top payload bits kept)
    if (magnitude == 0x7f800000u) return sign | 0x7c00;
    return sign | 0x7e00 | static_cast<uint16_t>((magnitude >> 13) & 0x3ff);
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {                       // below 2^-14: subnormal or zero
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // units of 2^-24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));  // 1024 encodes 2^-14 exactly
  }
  const uint32_t odd = (magnitude >> 13) & 1;
  magnitude += 0xc8000fffu + odd;  // rebias exponent by -112, round to nearest even
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

float BFloat16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBFloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

void ReduceSumInto(DataType type, void* dst, const void* src, size_t count) {
  switch (type) {
    case DataType::kFloat32: {
      float* d = static_cast<float*>(dst);
      const float* s = static_cast<const float*>(src);
      for (size_t i = 0; i < count; ++i) d[i] += s[i];
      return;
    }
    case DataType::kFloat16:
      SumInto16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, HalfToFloat,
                FloatToHalf);
      return;
    case DataType::kBFloat16:
      SumInto16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                BFloat16ToFloat, FloatToBFloat16);
      return;
  }
}

void DivideInPlace(DataType type, void* data, size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  switch (type) {
    case DataType::kFloat32: {
      float* p = static_cast<float*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= d;
      return;
    }
    case DataType::kFloat16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) / d);
      return;
    }
    case DataType::kBFloat16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToBFloat16(BFloat16ToFloat(p[i]) / d);
      return;
    }
  }
}

}  // namespace gravac::collectives
