// TopKCompressor ("topk"): keeps exactly k = KeepCount(n, θ) elements, the k largest |x| (ties:
// lower index), indices ascending, values signed and rounded to options.value_type.
//
// Compress reads a normal tensor once (plus a ~1/128 sample; see select.h) and rejects n beyond
// int32 indices, θ < 1 or NaN, and non-finite input (naming the tensor and the first bad index),
// all with InvalidArgument. CompressFrom(first, θ_c) selects the exact top-KeepCount(n, θ_c) of
// `first` (clamped to first.count()): for a `first` made by topk at a smaller θ this equals
// Compress on the full tensor at θ_c (multi-level compression). It is the selection skeleton
// (sparse_selection.h) with no threshold rule.
//
// Thread-safety: follows the Compressor contract (one caller at a time; scratch kept between
// calls; uses options.pool while it runs).
#ifndef GRAVAC_KERNELS_CPU_TOPK_H_
#define GRAVAC_KERNELS_CPU_TOPK_H_

#include "kernels/compressor.h"
#include "kernels/cpu/sparse_selection.h"

namespace gravac::kernels::cpu {

class TopKCompressor : public SparseSelectionCompressor {
 public:
  explicit TopKCompressor(const CompressorOptions& options)
      : SparseSelectionCompressor("topk", options, nullptr) {}
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_TOPK_H_
