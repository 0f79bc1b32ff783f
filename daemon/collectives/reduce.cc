#include "daemon/collectives/reduce.h"

#include <type_traits>

namespace gravac::collectives {
namespace {

template <typename Widen, typename Narrow>
void SumInto16(uint16_t* dst, const uint16_t* src, size_t count, Widen widen, Narrow narrow) {
  for (size_t i = 0; i < count; ++i) dst[i] = narrow(widen(dst[i]) + widen(src[i]));
}

template <typename T>
void SumInto(void* dst, const void* src, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  if constexpr (std::is_integral_v<T>) {
    // Two's complement wrap-around instead of signed overflow.
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < count; ++i) {
      d[i] = static_cast<T>(static_cast<U>(static_cast<U>(d[i]) + static_cast<U>(s[i])));
    }
  } else {
    for (size_t i = 0; i < count; ++i) d[i] += s[i];
  }
}

template <typename T, typename D>
void DivideBy(void* data, size_t count, D divisor) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / divisor);
}

}  // namespace

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
  }
  return 1;
}

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kFloat16:
      return "fp16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat64:
      return "fp64";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUInt8:
      return "uint8";
  }
  return "?";
}

std::string_view ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "average"; }

void ReduceSumInto(DataType type, void* dst, const void* src, size_t count) {
  switch (type) {
    case DataType::kFloat32:
      SumInto<float>(dst, src, count);
      return;
    case DataType::kFloat16:
      SumInto16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, HalfToFloat,
                FloatToHalf);
      return;
    case DataType::kBFloat16:
      SumInto16(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                BFloat16ToFloat, FloatToBFloat16);
      return;
    case DataType::kFloat64:
      SumInto<double>(dst, src, count);
      return;
    case DataType::kInt32:
      SumInto<int32_t>(dst, src, count);
      return;
    case DataType::kInt64:
      SumInto<int64_t>(dst, src, count);
      return;
    case DataType::kUInt8:
      SumInto<uint8_t>(dst, src, count);
      return;
  }
}

void DivideInPlace(DataType type, void* data, size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  switch (type) {
    case DataType::kFloat32:
      DivideBy<float>(data, count, d);
      return;
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
    case DataType::kFloat64:
      DivideBy<double>(data, count, static_cast<double>(divisor));
      return;
    case DataType::kInt32:
      DivideBy<int32_t>(data, count, divisor);
      return;
    case DataType::kInt64:
      DivideBy<int64_t>(data, count, static_cast<int64_t>(divisor));
      return;
    case DataType::kUInt8:
      DivideBy<uint8_t>(data, count, divisor);
      return;
  }
}

}  // namespace gravac::collectives
