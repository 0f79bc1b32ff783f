// DgcCompressor ("dgc"): Deep Gradient Compression's sampled threshold (GRAVAC.md, compressors).
//
// Rule, for k = KeepCount(n, θ):
//  1. Sample: kSampleChunk consecutive elements at every multiple of SampleStride(n), about 1%
//     of a large tensor (at least ~4096 positions; all of a tensor under 8192 elements). The
//     positions depend on n only, so every rank and run samples alike.
//  2. thr = the r-th largest sampled |x|, r = round(k · sample size / n) (at least 1).
//  3. count = #{|x| >= thr}; while count is outside [ceil(0.8k), floor(1.3k)], rescale thr, at
//     most kMaxPasses counts in all: ×1.25 (÷1.25) while the band is not bracketed, then
//     bisection between the closest too-high and too-low thresholds.
//  4. In the band: keep every |x| >= thr, and if that is more than k, the exact top-k of them.
//     Not in the band after kMaxPasses: the exact top-k of the tensor (e.g. all-equal |x|).
// Guaranteed band of the output count: ceil(0.8k) <= count <= k (count = k after a trim or a
// fallback). The output holds only elements whose |x| is >= every dropped |x|.
//
// Cost: one parallel pass gathers every element above a cut estimated from the same sample for
// rank ~1.3k, so the counts in step 3 run on that small set; a normal tensor is read once.
// Validation, ties and CompressFrom are as for topk (topk.h); the rule runs in the selection
// skeleton (sparse_selection.h).
//
// Thread-safety: follows the Compressor contract (one caller at a time).
#ifndef GRAVAC_KERNELS_CPU_DGC_H_
#define GRAVAC_KERNELS_CPU_DGC_H_

#include <cstdint>

#include "kernels/compressor.h"
#include "kernels/cpu/sparse_selection.h"

namespace gravac::kernels::cpu {

class DgcCompressor : public SparseSelectionCompressor {
 public:
  static constexpr int kMaxPasses = 10;

  explicit DgcCompressor(const CompressorOptions& options);

  // Sample stride for an n-element tensor (see the file comment).
  static int64_t SampleStride(int64_t n);
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_DGC_H_
