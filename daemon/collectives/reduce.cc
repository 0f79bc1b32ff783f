#include "daemon/collectives/reduce.h"

#include <type_traits>

#include "core/enum_names.h"

namespace gravac::collectives {
namespace {

template <typename Widen, typename Narrow>
void Sum16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count, Widen widen,
           Narrow narrow) {
  for (size_t i = 0; i < count; ++i) dst[i] = narrow(widen(a[i]) + widen(b[i]));
}

template <typename T>
void Sum(void* dst, const void* a, const void* b, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if constexpr (std::is_integral_v<T>) {
    // Two's complement wrap-around instead of signed overflow.
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < count; ++i) {
      d[i] = static_cast<T>(static_cast<U>(static_cast<U>(x[i]) + static_cast<U>(y[i])));
    }
  } else {
    for (size_t i = 0; i < count; ++i) d[i] = x[i] + y[i];
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
  constexpr EnumName<DataType> kNames[] = {
      {DataType::kFloat32, "fp32"}, {DataType::kFloat16, "fp16"}, {DataType::kBFloat16, "bf16"},
      {DataType::kFloat64, "fp64"}, {DataType::kInt32, "int32"},  {DataType::kInt64, "int64"},
      {DataType::kUInt8, "uint8"}};
  return NameOf(kNames, type, "?");
}

std::string_view ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "average"; }

void ReduceSum(DataType type, void* dst, const void* a, const void* b, size_t count) {
  const auto* a16 = static_cast<const uint16_t*>(a);
  const auto* b16 = static_cast<const uint16_t*>(b);
  switch (type) {
    case DataType::kFloat32:
      Sum<float>(dst, a, b, count);
      return;
    case DataType::kFloat16:
      Sum16(static_cast<uint16_t*>(dst), a16, b16, count, HalfToFloat, FloatToHalf);
      return;
    case DataType::kBFloat16:
      Sum16(static_cast<uint16_t*>(dst), a16, b16, count, BFloat16ToFloat, FloatToBFloat16);
      return;
    case DataType::kFloat64:
      Sum<double>(dst, a, b, count);
      return;
    case DataType::kInt32:
      Sum<int32_t>(dst, a, b, count);
      return;
    case DataType::kInt64:
      Sum<int64_t>(dst, a, b, count);
      return;
    case DataType::kUInt8:
      Sum<uint8_t>(dst, a, b, count);
      return;
  }
}

void ReduceSumInto(DataType type, void* dst, const void* src, size_t count) {
  ReduceSum(type, dst, dst, src, count);
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
