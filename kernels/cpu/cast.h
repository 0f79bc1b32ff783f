// Half-precision casts (fp16, bf16) and the dense cast compressors "fp16" and "bf16".
//
// Conversions round to nearest, ties to even, in software (no dependence on the host's F16C or
// compiler extensions), so every rank produces the same bits:
//  - FloatToHalf: IEEE binary16. Values beyond the fp16 range round to ±Inf (|x| >= 65520);
//    values below the smallest subnormal (2^-24) round to ±0 or to a subnormal; NaN stays NaN
//    (quiet, payload's top bits kept), Inf stays Inf.
//  - FloatToBFloat16: the top 16 bits of the fp32 pattern after rounding; NaN stays a quiet NaN,
//    finite values near FLT_MAX may round to ±Inf.
//  - HalfToFloat / BFloat16ToFloat are exact.
//
// RoundToValueType(type, values) replaces every x by float(cast(x)) in place (kFloat32: no-op);
// the sparse compressors call it so their values are already what the receiver sees.
//
// CastCompressor ("fp16" / "bf16") is dense: Compress produces a Compressed with dense = true,
// all n values rounded to the type, and ignores θ. A finite input that overflows fp16 (|x| >=
// 65520) is rejected with InvalidArgument naming the tensor and the index; non-finite input is
// rejected like every compressor does. CompressFrom(first, ...) returns `first` unchanged (a cast
// has one level: re-casting already-rounded values is the identity).
//
// Thread-safety: the free functions are stateless. A CastCompressor follows the Compressor
// contract (one caller at a time).
#ifndef GRAVAC_KERNELS_CPU_CAST_H_
#define GRAVAC_KERNELS_CPU_CAST_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"

namespace gravac::kernels::cpu {

uint16_t FloatToHalf(float x);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float x);
float BFloat16ToFloat(uint16_t b);

// In place x -> float(cast(x)) for every element; kFloat32 leaves values unchanged. A finite
// value beyond the fp16 range becomes ±Inf here; use RoundToValueTypeChecked to reject it.
void RoundToValueType(ValueType type, absl::Span<float> values);

// Like RoundToValueType, but fails with InvalidArgument naming `tensor_name` and the tensor index
// of the first value that is non-finite or overflows the type (fp16: |x| >= 65520; bf16: rounds
// to ±Inf). `indices` maps value positions to tensor indices (empty: the position is the index).
// Values after the first bad one are left unspecified.
absl::Status RoundToValueTypeChecked(ValueType type, absl::Span<float> values,
                                     std::string_view tensor_name,
                                     absl::Span<const int32_t> indices = {});

// Name of a value type for messages: "fp32", "fp16", "bf16".
std::string_view ValueTypeName(ValueType type);

class CastCompressor : public Compressor {
 public:
  // `type` must be kFloat16 or kBFloat16; options.value_type is ignored.
  CastCompressor(ValueType type, const CompressorOptions& options);

  std::string_view name() const override;
  bool is_dense() const override { return true; }

  absl::Status Compress(absl::Span<const float> input, double theta, const CompressContext& ctx,
                        Compressed* out) override;
  absl::Status CompressFrom(const Compressed& first, double theta, const CompressContext& ctx,
                            Compressed* out) override;

 private:
  ValueType type_;
  CompressorOptions options_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_CAST_H_
