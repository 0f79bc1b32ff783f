#include "daemon/collectives/reduce.h"


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
