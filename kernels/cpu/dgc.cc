#include "kernels/cpu/dgc.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "core/status.h"
#include "kernels/cpu/check.h"

namespace gravac::kernels::cpu {
namespace {

constexpr float kRescale = 1.25f;  // threshold step while the band is not bracketed

}  // namespace

DgcCompressor::DgcCompressor(const CompressorOptions& options)
    : options_(options), selector_(options.pool) {}

int64_t DgcCompressor::SampleStride(int64_t n) {
  return Selector::kSampleChunk * std::clamp<int64_t>(n / 4096, 1, 100);
}

absl::Status DgcCompressor::Compress(absl::Span<const float> input, double theta,
                                     const CompressContext& ctx, Compressed* out) {
  selector_.ResetStats();
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckCompressArgs(n, theta, ctx.tensor_name));
  PrepareSparseOutput(n, options_.value_type, out);
  RETURN_IF_ERROR(Select(input, KeepCount(n, theta), ctx.tensor_name, out));
  return FinishSparseOutput(ctx.tensor_name, out);
}

absl::Status DgcCompressor::Select(absl::Span<const float> input, int64_t k,
                                   std::string_view tensor_name, Compressed* out) {
  const int64_t n = static_cast<int64_t>(input.size());
  if (k >= n) return selector_.TopK(input, n, tensor_name, &out->indices, &out->values);
  if (!selector_.Sample(input, SampleStride(n), Selector::kSampleChunk, &sample_)) {
    return CheckInput(input, tensor_name, selector_.pool());
  }
  const int64_t s = static_cast<int64_t>(sample_.size());
  const int64_t r = std::clamp<int64_t>(std::llround(static_cast<double>(k) * s / n), 1, s);
  float thr = std::bit_cast<float>(selector_.KthLargestKey(sample_, r));
  const int64_t low = static_cast<int64_t>(std::ceil(0.8 * static_cast<double>(k)));
  const int64_t high = static_cast<int64_t>(std::floor(1.3 * static_cast<double>(k)));
  // Gather down to a cut below thr (rank ~1.3k plus the sampling margin), so that the counts
  // at lower thresholds usually need no further pass.
  const uint32_t cut = std::min(ThresholdKey(thr), selector_.EstimateCut(sample_, n, high));
  const int64_t budget = 4 * k + 4096;
  selector_.Gather(input, cut, budget, budget, /*sum_abs=*/false, &set_);
  if (set_.first_bad >= 0) {
    return NonFiniteError(tensor_name, set_.first_bad, input[set_.first_bad]);
  }
  const bool complete = set_.above_complete && set_.ties_complete;
  if (complete) counter_.Reset(set_);
  float too_low = -1.0f, too_high = -1.0f;  // thresholds that kept too many / too few
  int64_t count = 0;
  bool in_band = false;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    const uint32_t key = ThresholdKey(thr);
    const bool in_set = complete && key >= cut;
    count = in_set ? counter_.Count(key) : selector_.CountAtLeastKey(input, key);
    if (count >= low && count <= high) {
      in_band = true;
      break;
    }
    if (count > high) {
      too_low = thr;
      if (in_set) counter_.Raise();
      thr = too_high >= 0.0f ? too_low + (too_high - too_low) * 0.5f
                             : (thr > 0.0f ? thr * kRescale : FLT_MIN);
    } else {
      too_high = thr;
      if (in_set) counter_.Lower();
      thr = too_low >= 0.0f ? too_low + (too_high - too_low) * 0.5f : thr / kRescale;
    }
  }
  const uint32_t key = ThresholdKey(thr);
  if (in_band && count <= k) {
    if (set_.Holds(key)) {
      selector_.EmitAtLeast(set_, key, &out->indices, &out->values, count);
      return absl::OkStatus();
    }
    return selector_.FilterAtLeast(input, key, tensor_name, &out->indices, &out->values);
  }
  if (!in_band) selector_.MarkFallback();
  if (complete && set_.count() >= k) {
    selector_.EmitTopK(set_, k, &out->indices, &out->values);
    return absl::OkStatus();
  }
  return selector_.TopK(input, k, tensor_name, &out->indices, &out->values);
}

absl::Status DgcCompressor::CompressFrom(const Compressed& first, double theta,
                                         const CompressContext& ctx, Compressed* out) {
  return SelectFrom(first, theta, ctx, out);
}

}  // namespace gravac::kernels::cpu
