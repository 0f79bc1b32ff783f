// TopKCompressor ("topk"): keeps exactly k = KeepCount(n, θ) elements, the k largest |x| (ties:
// lower index), indices ascending, values signed and rounded to options.value_type.
//
// Compress reads a normal tensor once (plus a ~1/128 sample; see select.h) and rejects n beyond
// int32 indices, θ < 1 or NaN, and non-finite input (naming the tensor and the first bad index),
// all with InvalidArgument. CompressFrom(first, θ_c) selects the exact top-KeepCount(n, θ_c) of
// `first` (clamped to first.count()): for a `first` made by topk at a smaller θ this equals
// Compress on the full tensor at θ_c (multi-level compression).
//
// Thread-safety: follows the Compressor contract (one caller at a time; scratch kept between
// calls; uses options.pool while it runs).
#ifndef GRAVAC_KERNELS_CPU_TOPK_H_
#define GRAVAC_KERNELS_CPU_TOPK_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"
#include "kernels/cpu/select.h"

namespace gravac::kernels::cpu {

class TopKCompressor : public Compressor {
 public:
  explicit TopKCompressor(const CompressorOptions& options);

  std::string_view name() const override { return "topk"; }
  bool SecondLevelEqualsDirect() const override { return true; }

  absl::Status Compress(absl::Span<const float> input, double theta, const CompressContext& ctx,
                        Compressed* out) override;
  absl::Status CompressFrom(const Compressed& first, double theta, const CompressContext& ctx,
                            Compressed* out) override;

  // Cost of the last Compress (full passes over the input, whether the exact fallback ran).
  const SelectStats& last_stats() const { return selector_.stats(); }

 private:
  CompressorOptions options_;
  Selector selector_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_TOPK_H_
