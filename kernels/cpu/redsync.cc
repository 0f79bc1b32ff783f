#include "kernels/cpu/redsync.h"

#include <algorithm>
#include <bit>

#include "core/status.h"
#include "kernels/cpu/check.h"

namespace gravac::kernels::cpu {

RedSyncCompressor::RedSyncCompressor(const CompressorOptions& options)
    : options_(options), selector_(options.pool) {}

absl::Status RedSyncCompressor::Compress(absl::Span<const float> input, double theta,
                                         const CompressContext& ctx, Compressed* out) {
  selector_.ResetStats();
  const int64_t n = static_cast<int64_t>(input.size());
  RETURN_IF_ERROR(CheckCompressArgs(n, theta, ctx.tensor_name));
  PrepareSparseOutput(n, options_.value_type, out);
  RETURN_IF_ERROR(Select(input, KeepCount(n, theta), ctx.tensor_name, out));
  return FinishSparseOutput(ctx.tensor_name, out);
}

absl::Status RedSyncCompressor::Select(absl::Span<const float> input, int64_t k,
                                       std::string_view tensor_name, Compressed* out) {
  const int64_t n = static_cast<int64_t>(input.size());
  if (k >= n) return selector_.TopK(input, n, tensor_name, &out->indices, &out->values);
  if (!selector_.Sample(input, Selector::TopKSampleStride(n), Selector::kSampleChunk, &sample_)) {
    return CheckInput(input, tensor_name, selector_.pool());
  }
  const uint32_t cut = selector_.EstimateCut(sample_, n, 2 * k);
  const int64_t budget = 4 * k + 4096;
  selector_.Gather(input, cut, budget, budget, /*sum_abs=*/true, &set_);
  if (set_.first_bad >= 0) {
    return NonFiniteError(tensor_name, set_.first_bad, input[set_.first_bad]);
  }
  const bool complete = set_.above_complete && set_.ties_complete;
  if (complete) counter_.Reset(set_);
  // set_.count() >= 1 (the sampled element at the cut), so max_key is max|x| of the tensor.
  float hi = std::bit_cast<float>(set_.max_key);
  float lo = std::min(hi, static_cast<float>(set_.abs_sum / static_cast<double>(n)));
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    const float t = lo + (hi - lo) * 0.5f;
    const uint32_t key = ThresholdKey(t);
    if (key < set_.cut && set_.count() >= 2 * k) {  // at least 2k at or above t: no count
      lo = t;
      continue;
    }
    const bool in_set = complete && key >= set_.cut;
    const int64_t count = in_set ? counter_.Count(key) : selector_.CountAtLeastKey(input, key);
    if (count < k) {
      hi = t;
      if (in_set) counter_.Lower();
    } else if (count >= 2 * k) {
      lo = t;
      if (in_set) counter_.Raise();
    } else if (set_.Holds(key)) {
      selector_.EmitAtLeast(set_, key, &out->indices, &out->values, count);
      return absl::OkStatus();
    } else {
      return selector_.FilterAtLeast(input, key, tensor_name, &out->indices, &out->values);
    }
  }
  selector_.MarkFallback();
  if (complete && set_.count() >= k) {
    selector_.EmitTopK(set_, k, &out->indices, &out->values);
    return absl::OkStatus();
  }
  return selector_.TopK(input, k, tensor_name, &out->indices, &out->values);
}

absl::Status RedSyncCompressor::CompressFrom(const Compressed& first, double theta,
                                             const CompressContext& ctx, Compressed* out) {
  return SelectFrom(first, theta, ctx, out);
}

}  // namespace gravac::kernels::cpu
