// Element types and the local reduction kernels the collectives apply to received chunks.
//
// fp16 (IEEE binary16) and bf16 are stored as uint16_t bit patterns. They are reduced in fp32:
// each ReduceSumInto / ReduceSum widens both operands, adds in fp32 and rounds the sum once to
// the storage type (round to nearest, ties to even). A ring allreduce over p ranks therefore
// rounds p-1 times on the way, so a 16-bit result may differ from the exactly rounded sum by up
// to about (p-1)/2 units in the last place; sums that are exactly representable (e.g. small
// integers) are exact. DivideInPlace (used for the average) divides in fp32 and rounds once. fp32
// sums use ordinary float addition in ring order.
//
// fp64 sums in double and divides in double. The integer types (int32, int64, uint8) sum exactly
// in two's complement (a sum that overflows wraps modulo 2^bits instead of being undefined), and
// DivideInPlace divides with C++ integer division, truncating toward zero (so the "average" of
// integers is the truncated mean, e.g. -7 / 2 = -3).
//
// Thread-safety: stateless functions.
#ifndef GRAVAC_DAEMON_COLLECTIVES_REDUCE_H_
#define GRAVAC_DAEMON_COLLECTIVES_REDUCE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/cpu/cast.h"

namespace gravac::collectives {

enum class DataType { kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8 };
enum class ReduceOp { kSum, kAverage };

size_t DataTypeSize(DataType type);
std::string_view DataTypeName(DataType type);
std::string_view ReduceOpName(ReduceOp op);

// Conversions (round to nearest even; NaN stays NaN, overflow becomes infinity) are the
// kernels' own, so the collectives and the compressors round identically.
using ::gravac::kernels::cpu::BFloat16ToFloat;
using ::gravac::kernels::cpu::FloatToBFloat16;
using ::gravac::kernels::cpu::FloatToHalf;
using ::gravac::kernels::cpu::HalfToFloat;

// dst[i] = dst[i] + src[i] for i < count (count elements of `type`).
void ReduceSumInto(DataType type, void* dst, const void* src, size_t count);

// dst[i] = a[i] + b[i] for i < count, rounded as ReduceSumInto. dst may be a or b; otherwise no
// two of the ranges may overlap.
void ReduceSum(DataType type, void* dst, const void* a, const void* b, size_t count);

// data[i] = data[i] / divisor for i < count.
void DivideInPlace(DataType type, void* data, size_t count, int divisor);

}  // namespace gravac::collectives

#endif  // GRAVAC_DAEMON_COLLECTIVES_REDUCE_H_
