#include "kernels/cpu/redsync.h"

#include <algorithm>
#include <bit>
#include <memory>

namespace gravac::kernels::cpu {
namespace {

class RedSyncRule : public ThresholdRule {
 public:
  int64_t SampleStride(int64_t n) const override { return Selector::TopKSampleStride(n); }
  bool SumsAbs() const override { return true; }

  uint32_t Cut(Selector& selector, absl::Span<const uint32_t> sample, int64_t n,
               int64_t k) override {
    return selector.EstimateCut(sample, n, 2 * k);
  }

  ThresholdChoice Choose(const CandidateSet& set, ThresholdProbe& probe, int64_t n,
                         int64_t k) override {
    // set.count() >= 1 (the sampled element at the cut), so max_key is max|x| of the tensor.
    float hi = std::bit_cast<float>(set.max_key);
    float lo = std::min(hi, static_cast<float>(set.abs_sum / static_cast<double>(n)));
    for (int pass = 0; pass < RedSyncCompressor::kMaxPasses; ++pass) {
      const float t = lo + (hi - lo) * 0.5f;
      const uint32_t key = ThresholdKey(t);
      if (key < set.cut && set.count() >= 2 * k) {  // at least 2k at or above t: no count
        lo = t;
        continue;
      }
      const int64_t count = probe.Count(key);
      if (count < k) {
        hi = t;
        probe.Lower();
      } else if (count >= 2 * k) {
        lo = t;
        probe.Raise();
      } else {
        return ThresholdChoice::AtLeast(key, count);
      }
    }
    return ThresholdChoice::TopK(/*fallback=*/true);
  }

  int64_t MaxCount(int64_t n, double theta) const override {
    const int64_t k = KeepCount(n, theta);
    return k >= n ? n : std::min(n, 2 * k - 1);
  }
};

}  // namespace

RedSyncCompressor::RedSyncCompressor(const CompressorOptions& options)
    : SparseSelectionCompressor("redsync", options, std::make_unique<RedSyncRule>()) {}

}  // namespace gravac::kernels::cpu
