#include "kernels/cpu/dgc.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <memory>

namespace gravac::kernels::cpu {
namespace {

constexpr float kRescale = 1.25f;  // threshold step while the band is not bracketed

class DgcRule : public ThresholdRule {
 public:
  int64_t SampleStride(int64_t n) const override { return DgcCompressor::SampleStride(n); }

  uint32_t Cut(Selector& selector, absl::Span<const uint32_t> sample, int64_t n,
               int64_t k) override {
    const int64_t s = static_cast<int64_t>(sample.size());
    const int64_t r = std::clamp<int64_t>(std::llround(static_cast<double>(k) * s / n), 1, s);
    thr_ = std::bit_cast<float>(selector.KthLargestKey(sample, r));
    // Gather down to a cut below thr (rank ~1.3k plus the sampling margin), so that the counts
    // at lower thresholds usually need no further pass.
    return std::min(ThresholdKey(thr_), selector.EstimateCut(sample, n, High(k)));
  }

  ThresholdChoice Choose(const CandidateSet&, ThresholdProbe& probe, int64_t, int64_t k) override {
    const int64_t low = static_cast<int64_t>(std::ceil(0.8 * static_cast<double>(k)));
    const int64_t high = High(k);
    float thr = thr_;
    float too_low = -1.0f, too_high = -1.0f;  // thresholds that kept too many / too few
    int64_t count = 0;
    bool in_band = false;
    for (int pass = 0; pass < DgcCompressor::kMaxPasses; ++pass) {
      count = probe.Count(ThresholdKey(thr));
      if (count >= low && count <= high) {
        in_band = true;
        break;
      }
      if (count > high) {
        too_low = thr;
        probe.Raise();
        thr = too_high >= 0.0f ? too_low + (too_high - too_low) * 0.5f
                               : (thr > 0.0f ? thr * kRescale : FLT_MIN);
      } else {
        too_high = thr;
        probe.Lower();
        thr = too_low >= 0.0f ? too_low + (too_high - too_low) * 0.5f : thr / kRescale;
      }
    }
    // In the band: keep every |x| >= thr, trimmed to the exact top-k when that is more than k.
    if (in_band && count <= k) return ThresholdChoice::AtLeast(ThresholdKey(thr), count);
    return ThresholdChoice::TopK(/*fallback=*/!in_band);
  }

 private:
  static int64_t High(int64_t k) {
    return static_cast<int64_t>(std::floor(1.3 * static_cast<double>(k)));
  }

  float thr_ = 0.0f;  // the sample's estimate, from Cut to Choose
};

}  // namespace

DgcCompressor::DgcCompressor(const CompressorOptions& options)
    : SparseSelectionCompressor("dgc", options, std::make_unique<DgcRule>()) {}

int64_t DgcCompressor::SampleStride(int64_t n) {
  return Selector::kSampleChunk * std::clamp<int64_t>(n / 4096, 1, 100);
}

}  // namespace gravac::kernels::cpu
