// RedSyncCompressor ("redsync"): RedSync's threshold binary search (GRAVAC.md, compressors).
//
// Rule, for k = KeepCount(n, θ): lo = mean|x|, hi = max|x|; at most kMaxPasses times,
// t = lo + (hi - lo)/2 and count = #{|x| >= t}: count < k -> hi = t; count >= 2k -> lo = t;
// otherwise keep every |x| >= t (k <= count < 2k) and stop. If the band is not reached within
// kMaxPasses — all |x| equal, heavy ties, or k above #{|x| >= mean|x|} (θ below ~2) — the
// output is the exact top-k (count = k). So the count always satisfies k <= count < 2k
// (count = n when k = n), and the output holds only elements whose |x| is >= every dropped |x|.
//
// Cost: a deterministic ~1/128 sample estimates a cut for rank ~2k; one parallel pass gathers
// the elements above it and sums |x| (in an order independent of the pool size) and finds
// max|x|. A step whose t is below the cut needs no count (at least 2k lie above it), the others
// count within the gathered set, so a normal tensor is read once.
// Validation, ties and CompressFrom are as for topk (topk.h); the rule runs in the selection
// skeleton (sparse_selection.h).
//
// Thread-safety: follows the Compressor contract (one caller at a time).
#ifndef GRAVAC_KERNELS_CPU_REDSYNC_H_
#define GRAVAC_KERNELS_CPU_REDSYNC_H_

#include "kernels/compressor.h"
#include "kernels/cpu/sparse_selection.h"

namespace gravac::kernels::cpu {

// Its MaxCount is k <= count < 2k (count = n when k = n): min(n, 2k - 1), n when k >= n.
class RedSyncCompressor : public SparseSelectionCompressor {
 public:
  static constexpr int kMaxPasses = 20;

  explicit RedSyncCompressor(const CompressorOptions& options);
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_REDSYNC_H_
