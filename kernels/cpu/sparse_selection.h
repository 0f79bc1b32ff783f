// SparseSelectionCompressor: the one skeleton of the CPU selection compressors (topk, dgc,
// redsync), with the per-compressor threshold choice injected as a ThresholdRule.
//
// Compress checks n and θ (selection_output.h), sets the sparse header, selects for
// k = KeepCount(n, θ) and rounds the values to options.value_type. Selection:
//  - no rule (topk), or k >= n: the exact top-k (Selector::TopK).
//  - with a rule: a sample of kSampleChunk-element runs every rule->SampleStride(n) elements
//    (non-finite in it: CheckInput's error), one parallel Gather of the elements at or above
//    rule->Cut(...) (budget 4k + 4096 above it and at it), then rule->Choose(...) searches a
//    threshold, counting through a ThresholdProbe (within the gathered set when it holds the
//    threshold, else a full pass). The choice is either "keep every |x| >= t" (emitted from the
//    set when it holds t, else filtered from the input) or the exact top-k (from the set when it
//    holds k, else Selector::TopK), with `fallback` marking that the search missed its band.
// CompressFrom is the exact top-KeepCount(n, θ) of `first` (selection_output.h).
//
// Thread-safety: follows the Compressor contract (one caller at a time; scratch kept between
// calls; uses options.pool while it runs).
#ifndef GRAVAC_KERNELS_CPU_SPARSE_SELECTION_H_
#define GRAVAC_KERNELS_CPU_SPARSE_SELECTION_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/compressed.h"
#include "kernels/compressor.h"
#include "kernels/cpu/candidate_set.h"
#include "kernels/cpu/select.h"
#include "kernels/cpu/threshold_counter.h"

namespace gravac::kernels::cpu {

// Exact counts at a threshold key during a rule's search: within the gathered set when it holds
// every element at or above the key, else by a full pass over the input.
class ThresholdProbe {
 public:
  ThresholdProbe(Selector* selector, absl::Span<const float> input, const CandidateSet& set,
                 ThresholdCounter* counter, bool complete)
      : selector_(selector), input_(input), set_(set), counter_(counter), complete_(complete) {}

  // Number of elements with key >= `key`.
  int64_t Count(uint32_t key) {
    last_in_set_ = complete_ && key >= set_.cut;
    return last_in_set_ ? counter_->Count(key) : selector_->CountAtLeastKey(input_, key);
  }
  // After Count(key): every later key is >= it (Raise) or < it (Lower); lets the set shrink.
  void Raise() {
    if (last_in_set_) counter_->Raise();
  }
  void Lower() {
    if (last_in_set_) counter_->Lower();
  }

 private:
  Selector* selector_;
  absl::Span<const float> input_;
  const CandidateSet& set_;
  ThresholdCounter* counter_;
  bool complete_;
  bool last_in_set_ = false;
};

// What a rule's search decided.
struct ThresholdChoice {
  // Keep every element with key >= `key`, `count` of them (-1: unknown).
  static ThresholdChoice AtLeast(uint32_t key, int64_t count) { return {true, key, count, false}; }
  // Keep the exact top-k; `fallback`: because the search missed its band (SelectStats).
  static ThresholdChoice TopK(bool fallback) { return {false, 0, -1, fallback}; }

  bool keep_at_least;
  uint32_t key;
  int64_t count;
  bool fallback;
};

// The per-compressor part of a selection: where to sample, where to cut the gather, and how to
// search the threshold. Called once per Compress, in the order SampleStride, Cut, Choose (a rule
// may keep state from Cut to Choose); 0 < k < n.
class ThresholdRule {
 public:
  virtual ~ThresholdRule() = default;
  // The stride of the sample's kSampleChunk-element runs for an n-element tensor.
  virtual int64_t SampleStride(int64_t n) const = 0;
  // Whether the gather also sums |x| (CandidateSet::abs_sum).
  virtual bool SumsAbs() const { return false; }
  // The key to gather at, from the sample's keys.
  virtual uint32_t Cut(Selector& selector, absl::Span<const uint32_t> sample, int64_t n,
                       int64_t k) = 0;
  // The threshold search over the gathered set.
  virtual ThresholdChoice Choose(const CandidateSet& set, ThresholdProbe& probe, int64_t n,
                                 int64_t k) = 0;
  // Most elements an output may hold (Compressor::MaxCount).
  virtual int64_t MaxCount(int64_t n, double theta) const { return KeepCount(n, theta); }
};

class SparseSelectionCompressor : public Compressor {
 public:
  // rule == nullptr: the exact top-k.
  SparseSelectionCompressor(std::string_view name, const CompressorOptions& options,
                            std::unique_ptr<ThresholdRule> rule);

  std::string_view name() const override { return name_; }
  // Only the exact top-k of a top-k is the top-k of the tensor.
  bool SecondLevelEqualsDirect() const override { return rule_ == nullptr; }
  int64_t MaxCount(int64_t n, double theta) const override {
    return rule_ == nullptr ? KeepCount(n, theta) : rule_->MaxCount(n, theta);
  }

  absl::Status Compress(absl::Span<const float> input, double theta, const CompressContext& ctx,
                        Compressed* out) override;
  absl::Status CompressFrom(const Compressed& first, double theta, const CompressContext& ctx,
                            Compressed* out) override;

  // Cost of the last Compress (full passes over the input, whether a fallback ran).
  const SelectStats& last_stats() const { return selector_.stats(); }

 private:
  absl::Status Select(absl::Span<const float> input, int64_t k, std::string_view tensor_name,
                      Compressed* out);

  std::string_view name_;
  CompressorOptions options_;
  std::unique_ptr<ThresholdRule> rule_;
  Selector selector_;
  CandidateSet set_;
  ThresholdCounter counter_;
  std::vector<uint32_t> sample_;
};

}  // namespace gravac::kernels::cpu

#endif  // GRAVAC_KERNELS_CPU_SPARSE_SELECTION_H_
