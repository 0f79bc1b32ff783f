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
// Validation, ties and CompressFrom are as for topk (topk.h).
//
// Thread-safety: follows the Compressor contract (one caller at a time).
#ifndef GRAVAC_KERNELS_CPU_REDSYNC_H_
#define GRAVAC_KERNELS_CPU_REDSYNC_H_

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"
#include "kernels/cpu/select.h"

namespace gravac::kernels::cpu {

class RedSyncCompressor : public Compressor {
 public:
  static constexpr int kMaxPasses = 20;

  explicit RedSyncCompressor(const CompressorOptions& options);

  std::string_view name() const override { return "redsync"; }
  // k <= count < 2k (count = n when k = n).
  int64_t MaxCount(int64_t n, double theta) const override {
    const int64_t k = KeepCount(n, theta);
    return k >= n ? n : std::min(n, 2 * k - 1);
  }

  absl::Status Compress(absl::Span<const float> input, double theta, const CompressContext& ctx,
                        Compressed* out) override;
  absl::Status CompressFrom(const Compressed& first, double theta, const CompressContext& ctx,
                            Compressed* out) override;

  // Cost of the last Compress; `fallback` means the search did not converge (exact top-k).
  const SelectStats& last_stats() const { return selector_.stats(); }

 private:
  absl::Status Select(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                      Compressed* out);

  CompressorOptions options_;
  Selector selector_;
  CandidateSet set_;
  ThresholdCounter counter_;
  std::vector<uint32_t> sample_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_REDSYNC_H_
